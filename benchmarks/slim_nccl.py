"""Zero the device code of every GPU architecture but one in a CUDA library's fatbins.

NCCL's libnccl.so.2 (344 MB for 2.32.3) holds its kernels for sm_75 ... sm_120; one GPU
loads only its own (sm_90 on an H100 or H200). The file keeps its size and layout (the
driver reads each entry's header to choose), but the zeroed payloads compress to nothing:
43 MB as xz instead of 268 MB, small enough for one device call.
Usage: python benchmarks/slim_nccl.py IN OUT SM   (SM: 90 for Hopper)
"""

import collections
import struct
import subprocess
import sys

MAGIC = 0xBA55ED50  # a fatbin's header: magic, version, header size, size of its entries


def fatbin_sections(path: str):
    """(name, file offset, size) of the sections holding fatbins."""
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True, check=True)
    for line in out.stdout.splitlines():
        if "fatbin" in line and "]" in line:
            f = line.split("]")[1].split()
            yield f[0], int(f[3], 16), int(f[4], 16)


def entries(buf: bytes, start: int, end: int):
    """(kind: 1 PTX, 2 ELF; sm; payload offset; payload size) of each fatbin entry."""
    off = start
    while off + 16 <= end:
        magic, _, hsize, fsize = struct.unpack_from("<IHHQ", buf, off)
        if magic != MAGIC:
            off += 8  # fatbins are 8-byte aligned, padding between
            continue
        e, stop = off + hsize, off + hsize + fsize
        while e < stop:
            kind, _, ehsize, size = struct.unpack_from("<HHIQ", buf, e)
            if ehsize == 0:
                break
            yield kind, struct.unpack_from("<I", buf, e + 28)[0], e + ehsize, size
            e += ehsize + size
        off = stop


def main() -> None:
    src, dst, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(src, "rb") as f:
        buf = bytearray(f.read())
    kept = collections.Counter()
    for name, off, size in fatbin_sections(src):
        for _kind, sm, p, n in entries(buf, off, off + size):
            kept[(name, sm == keep)] += n
            if sm != keep:
                buf[p : p + n] = bytes(n)
    for (name, k), n in sorted(kept.items()):
        print(f"{name}: {'kept' if k else 'zeroed'} {n / 1e6:.1f} MB")
    if not any(k for _, k in kept):
        sys.exit(f"no sm_{keep} code in {src}; nothing written")
    with open(dst, "wb") as f:
        f.write(buf)


if __name__ == "__main__":
    main()
