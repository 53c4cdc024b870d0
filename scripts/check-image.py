#!/usr/bin/env python3
"""The image users build (deploy/Dockerfile, on registry base images) and the one built here
(deploy/Containerfile.scratch via scripts/image.sh) have the same layout: the binary's path, the
user, the file capability cap_net_bind_service, entrypoint, command, exposed ports and label keys.

    scripts/check-image.py              # the two files' final stages
    scripts/check-image.py REF          # and the built image REF against deploy/Dockerfile

Reads the final stage (after the last FROM) of each file. With REF it also reads the image's
config (podman image inspect) and its files (podman image mount, as root): the binary carries the
capability, /etc/passwd has the user. Prints one line per check; exits 1 if any failed.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
USERS_FILE = ROOT / "deploy/Dockerfile"
SCRATCH_FILE = ROOT / "deploy/Containerfile.scratch"
CAPABILITY = "cap_net_bind_service"
PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs"]


def instructions(text):
    """(KEYWORD, argument) pairs, continuation lines joined, comments dropped."""
    out, pending = [], ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, argument = line.strip().partition(" ")
        out.append((keyword.upper(), argument.strip()))
    return out


def layout(text):
    """The final stage's layout, and the setcap'd paths of every stage."""
    steps = instructions(text)
    last_from = max(i for i, (k, _) in enumerate(steps) if k == "FROM")
    final = steps[last_from:]

    def one(keyword):
        values = [a for k, a in final if k == keyword]
        return values[-1] if values else None

    entrypoint = json.loads(one("ENTRYPOINT") or "null")
    copies = {}
    for keyword, argument in final:
        if keyword == "COPY":
            words = [w for w in argument.split() if not w.startswith("--")]
            source, destination = words[0], words[-1]
            if destination.endswith("/") and source.endswith("/"):
                # A folder copied: the binary's path is under it (deploy/Dockerfile's /image/).
                if entrypoint:
                    relative = entrypoint[0].removeprefix(destination.rstrip("/") + "/")
                    copies[entrypoint[0]] = (argument, source.rstrip("/") + "/" + relative)
                continue
            copies[destination] = (argument, source)
    labels = set()
    for keyword, argument in final:
        if keyword == "LABEL":
            labels.update(re.findall(r'([A-Za-z0-9_.\-]+)=(?:"[^"]*"|\S+)', argument))
    setcap = set()
    for keyword, argument in steps:
        if keyword == "RUN":
            setcap.update(re.findall(CAPABILITY + r"=\+p\s+(\S+)", argument))
    return {
        "user": one("USER"),
        "expose": sorted(" ".join(a for k, a in final if k == "EXPOSE").split()),
        "entrypoint": entrypoint,
        "cmd": json.loads(one("CMD") or "null"),
        "binary": entrypoint[0] if entrypoint else None,
        "binary copied": entrypoint[0] in copies if entrypoint else False,
        "labels": sorted(labels),
        "_copies": copies,
        "_setcap": setcap,
    }


FIELDS = ["user", "expose", "entrypoint", "cmd", "binary", "binary copied", "labels"]


def compare(users, scratch):
    """Differences between the two files' layouts, as messages."""
    problems = []
    a, b = layout(users), layout(scratch)
    for field in FIELDS:
        if a[field] != b[field]:
            problems.append(f"{field}: Dockerfile {a[field]!r}, Containerfile.scratch {b[field]!r}")
    # deploy/Dockerfile sets the capability in its build stage on what its final stage copies to
    # the binary's path (scripts/image.sh does it before COPY; the built image is checked below).
    copied = a["_copies"].get(a["binary"])
    if copied is None or copied[1] not in a["_setcap"]:
        problems.append(f"Dockerfile: no `setcap {CAPABILITY}=+p` on what is copied to {a['binary']}")
    if a["user"] != "65532:65532":
        problems.append(f"Dockerfile: USER {a['user']}, not 65532:65532")
    return problems


def image_problems(ref, want):
    problems = []
    config = json.loads(subprocess.check_output(PODMAN + ["image", "inspect", ref]))[0]["Config"]
    if config.get("User") != want["user"]:
        problems.append(f"image user {config.get('User')!r}, Dockerfile {want['user']!r}")
    ports = sorted(p.split("/")[0] for p in config.get("ExposedPorts", {}))
    if ports != want["expose"]:
        problems.append(f"image exposes {ports}, Dockerfile {want['expose']}")
    for field, key in [("entrypoint", "Entrypoint"), ("cmd", "Cmd")]:
        if config.get(key) != want[field]:
            problems.append(f"image {field} {config.get(key)!r}, Dockerfile {want[field]!r}")
    labels = config.get("Labels") or {}
    for key in want["labels"]:
        if not labels.get(key) or labels[key] == "unknown" and not key.endswith("source"):
            problems.append(f"image label {key} is {labels.get(key)!r}")
    tag = ref.rsplit(":", 1)[-1]
    if labels.get("org.opencontainers.image.version") != tag:
        problems.append(f"image version label {labels.get('org.opencontainers.image.version')!r}, tag {tag!r}")
    # The commit the image was built from (a stale build cache once kept an older one).
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    revision = labels.get("org.opencontainers.image.revision", "")
    if head.returncode == 0 and revision.removesuffix("-dirty") != head.stdout.strip():
        problems.append(f"image revision label {revision!r}, HEAD is {head.stdout.strip()}")
    root = subprocess.check_output(PODMAN + ["image", "mount", ref], text=True).strip()
    try:
        caps = subprocess.run(["getcap", root + want["binary"]], capture_output=True, text=True).stdout
        # Permitted only (=p): with the effective bit (=ep) the kernel refuses to exec the binary
        # in a container that drops the capability (ingress-nginx's certificate Jobs drop ALL).
        if not caps.rstrip().endswith(f"{CAPABILITY}=p"):
            problems.append(f"{want['binary']} in the image has not {CAPABILITY}=p (getcap: {caps.strip()!r})")
        # ingress-nginx's chart runs /wait-shutdown as its preStop hook: a link to the binary.
        link = Path(root, "wait-shutdown")
        target = link.readlink() if link.is_symlink() else None
        if target is not None and target.is_absolute():
            target = Path(root + str(target))
        elif target is not None:
            target = Path(root, target)
        if target is None or target.resolve() != Path(root + want["binary"]).resolve():
            problems.append(f"/wait-shutdown in the image is not a link to {want['binary']}")
        uid = want["user"].split(":")[0]
        passwd = Path(root, "etc/passwd").read_text()
        if not re.search(rf"^[^:]+:x:{uid}:", passwd, re.M):
            problems.append(f"/etc/passwd in the image has no user {uid}")
    finally:
        subprocess.run(PODMAN + ["image", "unmount", ref], capture_output=True)
    return problems


def main():
    users, scratch = USERS_FILE.read_text(), SCRATCH_FILE.read_text()
    failed = 0

    def report(name, problems):
        nonlocal failed
        print(("ok    " if not problems else "FAIL  ") + name)
        for problem in problems:
            print("      " + problem)
        failed += bool(problems)

    report("deploy/Dockerfile and deploy/Containerfile.scratch: same layout", compare(users, scratch))
    # The check itself must catch a difference.
    mutated = users.replace("USER 65532:65532", "USER 0:0").replace("EXPOSE 80 443", "EXPOSE 80")
    report("a Dockerfile with another USER and EXPOSE is caught",
           [] if len(compare(mutated, scratch)) >= 2 else ["not caught"])
    no_setcap = users.replace(f"setcap {CAPABILITY}=+p", "true")
    report("a Dockerfile without setcap is caught",
           [] if compare(no_setcap, scratch) else ["not caught"])
    if len(sys.argv) > 1:
        report(f"{sys.argv[1]}: the layout of deploy/Dockerfile, labels set, capability on the binary",
               image_problems(sys.argv[1], layout(users)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
