//! Request-body buffering (`proxy-request-buffering: on`, ingress-nginx's default, nginx's
//! `proxy_request_buffering on`): the whole body is read before an upstream is chosen, so a
//! slow upload never holds a backend connection, and the body can be sent again when an
//! attempt fails after it was written.
//!
//! ```text
//!  client body ─▶ RequestBody::client (client-body-timeout ─▶ 408, client-max-body-size ─▶ 413)
//!     │ frames copied while they fit client-body-buffer-size
//!     ├─ fits ─▶ Stored::Memory: one Bytes ─▶ goes out with the head in one writev
//!     └─ larger (or declared larger) ─▶ an unnamed temporary file in temp_dir (O_TMPFILE, or
//!        created and unlinked at once: nothing is left behind, whatever happens to the process),
//!        written through a staging buffer of max(client-body-buffer-size, 64 KiB)
//!        ─▶ Stored::File ─▶ read back with pread, 64 KiB per frame
//!  forward: Content-Length set (a chunked upload goes upstream with its length, as nginx
//!  sends it) ─▶ RequestBody::Buffered ─▶ every upstream attempt rewinds it to its first byte
//! ```
//!
//! File reads and writes block the worker thread, as nginx's do: for the page cache they are
//! memory copies. Writes and reads are at least 64 KiB so that a large upload costs few system
//! calls. Memory per buffered request: the body itself up to `client-body-buffer-size`, else
//! the staging buffer while reading and one 64 KiB frame at a time while sending.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use model::RoutePolicy;

use crate::body::BoxError;

/// The least a temporary-file write or read moves at once.
pub(crate) const FILE_CHUNK: usize = 64 * 1024;

/// How a route's request bodies are read: the one input the proxy takes, made in one place
/// (`BodyBuffering::of`) so that where the values come from can change alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BodyBuffering {
    /// `proxy-request-buffering`.
    pub(crate) enabled: bool,
    /// `client-body-buffer-size`: the largest body kept in memory.
    pub(crate) in_memory: usize,
    /// `client-max-body-size` / `proxy-body-size`: larger bodies get 413; 0: no limit.
    pub(crate) max: u64,
}

/// A request body read whole, ready to be sent (and sent again) from its first byte.
pub(crate) struct Buffered {
    stored: Stored,
    len: u64,
    /// Bytes handed out by the current attempt.
    sent: u64,
}

enum Stored {
    Memory(Bytes),
    File(File),
}

/// Where a buffered body ended up (for the metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    Memory,
    File,
}

/// Reading a body whole failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BufferError {
    /// The client's body failed: too large, too slow, or broken (the body's own error).
    #[error("reading the request body failed")]
    Body(#[source] BoxError),
    #[error(transparent)]
    File(#[from] BufferFileError),
}

/// The temporary file of a buffered body could not be made, written or read: the proxy's own
/// trouble (a full or read-only temporary directory), never the client's or the upstream's.
#[derive(Debug, thiserror::Error)]
#[error("the temporary file of a buffered request body failed")]
pub(crate) struct BufferFileError(#[source] pub(crate) io::Error);

impl BodyBuffering {
    /// A route's body handling: the ConfigMap's `proxy-request-buffering`,
    /// `client-body-buffer-size` and `proxy-body-size`, or its Ingress's annotations of those
    /// names.
    pub(crate) fn of(policy: &RoutePolicy) -> BodyBuffering {
        BodyBuffering {
            enabled: policy.body.request_buffering,
            in_memory: policy.body.buffer_size,
            max: policy.body.max_size,
        }
    }
}

/// Reads `body` to its end into memory, or into a temporary file in `dir` once it is larger
/// than `in_memory` bytes (at once when its `declared` length is). Trailers are dropped, as
/// they are when a body is streamed.
pub(crate) async fn read_whole<B>(
    mut body: B,
    declared: Option<u64>,
    in_memory: usize,
    dir: &Path,
) -> Result<Buffered, BufferError>
where
    B: Body<Data = Bytes, Error = BoxError> + Unpin,
{
    let fits = |len: u64| usize::try_from(len).is_ok_and(|len| len <= in_memory);
    let staging = in_memory.max(FILE_CHUNK);
    let mut file = None;
    let mut staged = match declared {
        Some(len) if fits(len) => BytesMut::with_capacity(len as usize),
        Some(_) => {
            file = Some(temporary_file(dir)?);
            BytesMut::with_capacity(staging)
        }
        None => BytesMut::new(),
    };
    let mut len: u64 = 0;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(BufferError::Body)?.into_data() else {
            continue;
        };
        len += data.len() as u64;
        match &mut file {
            None if fits(len) => {
                if staged.capacity() == 0 {
                    // Once, and no larger than the limit: growing by doubling could pass it.
                    staged.reserve(in_memory);
                }
                staged.extend_from_slice(&data);
            }
            None => {
                let mut spill = temporary_file(dir)?;
                staged.reserve(staging.saturating_sub(staged.len()));
                stage(&mut spill, &mut staged, &data, staging)?;
                file = Some(spill);
            }
            Some(file) => stage(file, &mut staged, &data, staging)?,
        }
    }
    let stored = match file {
        None => Stored::Memory(staged.freeze()),
        Some(mut file) => {
            file.write_all(&staged).map_err(BufferFileError)?;
            Stored::File(file)
        }
    };
    Ok(Buffered {
        stored,
        len,
        sent: 0,
    })
}

/// Appends `data` to the file through the staging buffer, writing whenever `chunk` bytes are
/// staged; a frame of a chunk or more while nothing is staged is written as it is.
fn stage(
    file: &mut File,
    staged: &mut BytesMut,
    mut data: &[u8],
    chunk: usize,
) -> Result<(), BufferFileError> {
    if staged.is_empty() && data.len() >= chunk {
        return file.write_all(data).map_err(BufferFileError);
    }
    while !data.is_empty() {
        let take = (chunk - staged.len()).min(data.len());
        staged.extend_from_slice(&data[..take]);
        data = &data[take..];
        if staged.len() == chunk {
            file.write_all(staged).map_err(BufferFileError)?;
            staged.clear();
        }
    }
    Ok(())
}

/// A file without a name: gone with its last descriptor, so nothing outlives the request,
/// whatever happens to the process.
fn temporary_file(dir: &Path) -> Result<File, BufferFileError> {
    tempfile::tempfile_in(dir).map_err(BufferFileError)
}

impl Buffered {
    /// A body already in memory (a message of the proxy's own).
    pub(crate) fn memory(bytes: Bytes) -> Buffered {
        Buffered {
            len: bytes.len() as u64,
            stored: Stored::Memory(bytes),
            sent: 0,
        }
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    pub(crate) fn place(&self) -> Place {
        match self.stored {
            Stored::Memory(_) => Place::Memory,
            Stored::File(_) => Place::File,
        }
    }

    /// Another reader of the same body, from its first byte (a mirrored request's): the same
    /// bytes in memory, or the same file (read by offset, so the two never disturb each other;
    /// the file lives while either does).
    pub(crate) fn copy(&self) -> Result<Buffered, BufferFileError> {
        let stored = match &self.stored {
            Stored::Memory(bytes) => Stored::Memory(bytes.clone()),
            Stored::File(file) => Stored::File(file.try_clone().map_err(BufferFileError)?),
        };
        Ok(Buffered {
            stored,
            len: self.len,
            sent: 0,
        })
    }

    /// The whole body as one piece (a file's read back): what goes inside one message.
    pub(crate) fn to_bytes(&self) -> Result<Bytes, BufferFileError> {
        match &self.stored {
            Stored::Memory(bytes) => Ok(bytes.clone()),
            Stored::File(file) => {
                let len = usize::try_from(self.len).map_err(|_| {
                    BufferFileError(io::Error::new(io::ErrorKind::OutOfMemory, "too large"))
                })?;
                let mut buf = vec![0; len];
                file.read_exact_at(&mut buf, 0).map_err(BufferFileError)?;
                Ok(Bytes::from(buf))
            }
        }
    }

    /// Starts again from the first byte (each upstream attempt does).
    pub(crate) fn rewind(&mut self) {
        self.sent = 0;
    }

    fn next_frame(&mut self) -> Result<Option<Bytes>, BufferFileError> {
        let left = self.len - self.sent;
        if left == 0 {
            return Ok(None);
        }
        let data = match &self.stored {
            Stored::Memory(bytes) => bytes.clone(),
            Stored::File(file) => {
                let n = usize::try_from(left).map_or(FILE_CHUNK, |left| left.min(FILE_CHUNK));
                let mut buf = vec![0; n];
                file.read_exact_at(&mut buf, self.sent)
                    .map_err(BufferFileError)?;
                Bytes::from(buf)
            }
        };
        self.sent += data.len() as u64;
        Ok(Some(data))
    }
}

impl Body for Buffered {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Poll::Ready(match self.get_mut().next_frame() {
            Ok(data) => data.map(|data| Ok(Frame::data(data))),
            Err(e) => Some(Err(e.into())),
        })
    }

    fn is_end_stream(&self) -> bool {
        self.sent == self.len
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.len - self.sent)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::VecDeque;
    use std::os::unix::fs::MetadataExt;

    use super::*;

    /// A body that yields these frames, each at once (the tee's tests use it too).
    pub(crate) struct Frames(pub(crate) VecDeque<Result<Frame<Bytes>, BoxError>>);

    impl Body for Frames {
        type Data = Bytes;
        type Error = BoxError;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            Poll::Ready(self.get_mut().0.pop_front())
        }
    }

    /// A body arriving in these pieces.
    fn pieces(pieces: Vec<Vec<u8>>) -> Frames {
        Frames(
            pieces
                .into_iter()
                .map(|p| Ok(Frame::data(Bytes::from(p))))
                .collect(),
        )
    }

    /// Deterministic bytes that differ from position to position.
    fn sample(len: usize, seed: u32) -> Vec<u8> {
        let mut x = seed.wrapping_mul(2_654_435_761) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    }

    async fn replay(body: &mut Buffered) -> Vec<u8> {
        body.rewind();
        let mut out = Vec::new();
        while let Some(frame) = body.frame().await {
            out.extend_from_slice(&frame.unwrap().into_data().unwrap());
        }
        assert!(body.is_end_stream());
        out
    }

    fn read(pieces_in: Vec<Vec<u8>>, declared: Option<u64>, in_memory: usize) -> Buffered {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime
            .block_on(read_whole(
                pieces(pieces_in),
                declared,
                in_memory,
                &std::env::temp_dir(),
            ))
            .unwrap()
    }

    #[test]
    fn a_body_that_fits_stays_in_memory_and_replays_whole() {
        let data = sample(8 * 1024, 1);
        let chunks: Vec<Vec<u8>> = data.chunks(1000).map(<[u8]>::to_vec).collect();
        let mut body = read(chunks, None, 8 * 1024);
        assert_eq!(body.place(), Place::Memory);
        assert_eq!(body.len(), data.len() as u64);
        let Stored::Memory(bytes) = &body.stored else {
            unreachable!()
        };
        // Never more than the limit, even while the body was growing.
        assert!(bytes.len() <= 8 * 1024);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for _ in 0..2 {
            assert_eq!(runtime.block_on(replay(&mut body)), data);
        }
        // One byte more does not fit.
        let over = sample(8 * 1024 + 1, 1);
        let chunks: Vec<Vec<u8>> = over.chunks(1000).map(<[u8]>::to_vec).collect();
        let mut body = read(chunks, None, 8 * 1024);
        assert_eq!(body.place(), Place::File);
        assert_eq!(runtime.block_on(replay(&mut body)), over);
    }

    #[test]
    fn a_larger_body_goes_to_an_unlinked_file_and_replays_whole() {
        let data = sample(300 * 1024 + 7, 2);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        // Undeclared (chunked), in odd pieces: it spills once it passes the memory buffer.
        let chunks: Vec<Vec<u8>> = data.chunks(3001).map(<[u8]>::to_vec).collect();
        let mut body = read(chunks, None, 8 * 1024);
        assert_eq!(body.place(), Place::File);
        let Stored::File(file) = &body.stored else {
            unreachable!()
        };
        assert_eq!(file.metadata().unwrap().nlink(), 0, "the file has no name");
        assert_eq!(file.metadata().unwrap().len(), data.len() as u64);
        for _ in 0..2 {
            assert_eq!(runtime.block_on(replay(&mut body)), data);
        }

        // Declared larger than the buffer, in one big frame: straight to the file.
        let mut body = read(vec![data.clone()], Some(data.len() as u64), 8 * 1024);
        assert_eq!(body.place(), Place::File);
        assert_eq!(runtime.block_on(replay(&mut body)), data);
    }

    #[test]
    fn file_frames_are_large() {
        let data = sample(FILE_CHUNK * 2 + 1, 3);
        let mut body = read(vec![data], None, 1024);
        let mut sizes = Vec::new();
        while let Ok(Some(frame)) = body.next_frame() {
            sizes.push(frame.len());
        }
        assert_eq!(sizes, [FILE_CHUNK, FILE_CHUNK, 1]);
    }

    #[test]
    fn a_failing_body_fails_the_read_with_its_own_error() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let body = Frames(VecDeque::from([
            Ok(Frame::data(Bytes::from_static(b"abc"))),
            Err(crate::body::BodyTimeout.into()),
        ]));
        let result = runtime.block_on(read_whole(body, None, 1024, &std::env::temp_dir()));
        match result {
            Err(BufferError::Body(e)) => assert!(e.is::<crate::body::BodyTimeout>()),
            other => panic!("{:?}", other.err()),
        }
    }

    #[test]
    fn an_unusable_temporary_directory_is_a_file_error() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let missing = std::env::temp_dir().join("sluice-no-such-directory/below");
        let result = runtime.block_on(read_whole(
            pieces(vec![sample(4096, 4)]),
            None,
            1024,
            &missing,
        ));
        assert!(matches!(result, Err(BufferError::File(_))));
    }
}
