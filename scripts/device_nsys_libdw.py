"""Retry nsys's .qdstrm import with Debian's libdw1 (and what it needs) unpacked beside it.

On the GPU machine nsys writes a .qdstrm but its QdstrmImporter cannot start: libdw.so.1 is
missing. This script unpacks .deb files (pure Python: ar + tar, no dpkg needed), links only the
libraries the importer's ``ldd`` reports as "not found" into one folder, and then either imports
a given .qdstrm or reruns ``profile.py nsys`` with that folder on LD_LIBRARY_PATH. It prints what
``ldd`` said before and after and what each step returned.

Fetch the .debs on a Debian 12 machine with network (libdw1's dependencies there: libbz2-1.0,
libc6, libelf1, liblzma5, zlib1g; libc6 stays the device's own):

    mkdir -p build/debs && cd build/debs && \
        apt-get download libdw1 libelf1 libbz2-1.0 liblzma5 zlib1g

then, on the device:

    python3 scripts/device_nsys_libdw.py build/debs                  # rerun profile.py nsys
    python3 scripts/device_nsys_libdw.py build/debs runs/X/nsys.qdstrm  # import one file
"""

from __future__ import annotations

import glob
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def unpack_deb(deb: Path, into: Path) -> None:
    """A .deb is an ar archive holding data.tar.{xz,zst,gz}; extract that tar."""
    data = deb.read_bytes()
    if not data.startswith(b"!<arch>\n"):
        raise SystemExit(f"{deb} is not a .deb (ar) archive")
    offset = 8
    while offset + 60 <= len(data):
        header = data[offset : offset + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        body = data[offset + 60 : offset + 60 + size]
        offset += 60 + size + (size % 2)
        if name.startswith("data.tar"):
            if name.endswith(".zst"):
                raise SystemExit(f"{deb}: data.tar.zst needs zstd; use Debian 12 .debs (xz)")
            with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as tar:
                tar.extractall(into, filter="tar") if sys.version_info >= (
                    3,
                    12,
                ) else tar.extractall(into)
            return
    raise SystemExit(f"{deb} has no data.tar member")


def locate_nsys() -> str | None:
    if os.environ.get("NSYS"):
        return os.environ["NSYS"]
    found = shutil.which("nsys")
    if found:
        return found
    for pattern in (
        "/opt/nvidia/nsight-systems/*/bin/nsys",
        "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
    ):
        matches = sorted(glob.glob(pattern), reverse=True)
        if matches:
            return matches[0]
    return None


def missing_libraries(binary: Path, libdir: Path) -> tuple[list[str], str]:
    env = dict(os.environ, LD_LIBRARY_PATH=str(libdir))
    ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, env=env)
    text = ldd.stdout + ldd.stderr
    return [line.split()[0] for line in text.splitlines() if "not found" in line], text


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    deb_dir = Path(sys.argv[1])
    qdstrm = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    nsys = locate_nsys()
    if nsys is None:
        print("nsys not found (PATH, $NSYS, /opt/nvidia/...)")
        return 1
    # nsys sits in host/target-linux-x64/, the importer in a sibling folder (on the H200
    # machine: host/linux-desktop-glibc_2_11_3-x64/QdstrmImporter)
    host = Path(nsys).resolve().parent.parent
    found = sorted(host.glob("*/QdstrmImporter"))
    print(f"nsys: {nsys}\nimporter: {', '.join(map(str, found)) or f'none under {host}'}")
    if not found:
        return 1
    importer = found[0]
    debs = sorted(deb_dir.glob("*.deb"))
    print(f"debs: {', '.join(d.name for d in debs) or 'none'}")
    work = Path(tempfile.mkdtemp(prefix="libdw-"))
    unpacked, libdir = work / "root", work / "lib"
    libdir.mkdir(parents=True)
    for deb in debs:
        unpack_deb(deb, unpacked)
    missing, after = missing_libraries(importer, libdir)
    print("ldd before: " + (", ".join(missing) + " not found" if missing else "nothing missing"))
    for _ in range(5):
        if not missing:
            break
        for lib in missing:
            candidates = sorted(unpacked.rglob(lib))
            if candidates:
                (libdir / lib).unlink(missing_ok=True)
                (libdir / lib).symlink_to(candidates[0].resolve())
                print(f"  linked {lib} -> {candidates[0].resolve().relative_to(unpacked)}")
            else:
                print(f"  {lib}: not in the .debs")
        still, after = missing_libraries(importer, libdir)
        if still == missing:
            break
        missing = still
    print(
        "ldd after: " + (", ".join(missing) + " still not found" if missing else "nothing missing")
    )
    for line in after.splitlines():
        if "libdw" in line or "libelf" in line:
            print("  " + line.strip())
    env = dict(
        os.environ,
        LD_LIBRARY_PATH=str(libdir)
        + (":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else ""),
    )
    if qdstrm is not None:
        help_text = subprocess.run(
            [str(importer), "--help"], capture_output=True, text=True, env=env
        )
        print(
            "importer --help (first lines):\n  "
            + "\n  ".join((help_text.stdout + help_text.stderr).splitlines()[:12])
        )
        done = subprocess.run(
            [str(importer), "-i", str(qdstrm)], capture_output=True, text=True, env=env
        )
        print(f"importer -i {qdstrm}: status {done.returncode}\n{done.stdout}{done.stderr}")
        report = qdstrm.with_suffix(".nsys-rep")
        print(f"{report}: {'written' if report.exists() else 'not written'}")
        if report.exists():
            stats = subprocess.run(
                [
                    nsys,
                    "stats",
                    "--report",
                    "cuda_gpu_kern_sum,nvtx_sum",
                    "--format",
                    "csv",
                    "--output",
                    str(report.with_suffix("")),
                    "--force-export=true",
                    str(report),
                ],
                capture_output=True,
                text=True,
                env=env,
            )
            print(
                f"nsys stats: status {stats.returncode}\n{stats.stdout[-3000:]}"
                f"{stats.stderr[-2000:]}"
            )
        return done.returncode
    command = [
        sys.executable,
        str(ROOT / "profile.py"),
        "nsys",
        "--backend",
        "pytorch_fp16",
        "--bs",
        "8",
    ]
    print("$ LD_LIBRARY_PATH=" + str(libdir) + " " + " ".join(command))
    return subprocess.run(command, env=env, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
