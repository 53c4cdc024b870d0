"""Reads HTTP/2 frames, one per line in hex on stdin, with hyperframe (python-hyper's frame
codec, independent of Sluice) and prints one line per frame: what it parsed, in the form
frames.rs (beside it) writes wire's parse in, or `refused <class>`."""

import sys

from hyperframe.exceptions import HyperframeError, InvalidFrameError
from hyperframe.frame import Frame

# Flags each type defines (the bits a parse keeps; others are ignored on receipt).
END_STREAM, ACK, END_HEADERS, PRIORITY = 0x1, 0x1, 0x4, 0x20


def describe(frame):
    kind = frame.type
    flags = frame.flags
    stream = frame.stream_id
    if kind == 0x0:
        return f"DATA {stream} es={int('END_STREAM' in flags)} {frame.data.hex()}"
    if kind == 0x1:
        priority = "-"
        if "PRIORITY" in flags:
            priority = f"{frame.depends_on}/{int(frame.exclusive)}/{frame.stream_weight}"
        return (f"HEADERS {stream} es={int('END_STREAM' in flags)} "
                f"eh={int('END_HEADERS' in flags)} p={priority} {frame.data.hex()}")
    if kind == 0x2:
        return f"PRIORITY {stream} {frame.depends_on}/{int(frame.exclusive)}/{frame.stream_weight}"
    if kind == 0x3:
        return f"RST_STREAM {stream} {frame.error_code}"
    if kind == 0x4:
        known = [frame.settings.get(i) for i in (1, 2, 3, 4, 5, 6, 8)]
        values = ",".join("-" if v is None else str(v) for v in known)
        return f"SETTINGS ack={int('ACK' in flags)} {values}"
    if kind == 0x6:
        return f"PING ack={int('ACK' in flags)} {frame.opaque_data.hex()}"
    if kind == 0x7:
        last = frame.last_stream_id & 0x7FFFFFFF
        return f"GOAWAY {last} {frame.error_code} {frame.additional_data.hex()}"
    if kind == 0x8:
        return f"WINDOW_UPDATE {stream} {frame.window_increment}"
    if kind == 0x9:
        return f"CONTINUATION {stream} eh={int('END_HEADERS' in flags)} {frame.data.hex()}"
    return f"UNKNOWN {kind}"


def main():
    # Everything is read first: the caller writes all of it before reading any answer.
    lines = sys.stdin.read().split()
    out = []
    for line in lines:
        raw = bytes.fromhex(line)
        try:
            frame, length = Frame.parse_frame_header(memoryview(raw[:9]))
            frame.parse_body(memoryview(raw[9:9 + length]))
            out.append(describe(frame))
        except InvalidFrameError:
            # A length that does not fit the type: RFC 9113's FRAME_SIZE_ERROR.
            out.append("refused size")
        except HyperframeError:
            # Bad values, padding, or a frame on the wrong kind of stream: PROTOCOL_ERROR.
            out.append("refused protocol")
    sys.stdout.write("\n".join(out) + "\n")


main()
