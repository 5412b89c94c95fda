"""Files for the attachment tests, made here (no fixtures on disk): real PNG/GIF bytes,
headers of JPEG and WebP, a zip bomb, broken UTF-8, an SVG with script."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib


def png(width: int = 4, height: int = 3, *, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A real, decodable PNG of one colour."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body))
            + kind
            + body
            + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
        )

    row = b"\x00" + bytes(rgb) * width
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(row * height))
        + chunk(b"IEND", b"")
    )


def png_header(width: int, height: int) -> bytes:
    """Only a PNG's signature and IHDR: what a decompression bomb's header claims."""
    return png(1, 1)[:8] + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", width, height)


def gif(width: int = 2, height: int = 2) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00;"


def jpeg(width: int = 640, height: int = 480) -> bytes:
    """A JPEG's start: SOI, an APP0 segment, then SOF0 with the size."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


def webp(width: int = 300, height: int = 200) -> bytes:
    body = b"VP8X" + struct.pack("<I", 10) + b"\x00\x00\x00\x00"
    body += (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", len(body) + 4) + b"WEBP" + body


def zip_bomb() -> bytes:
    """A small zip (tens of KB) that expands to 30 MB of zeros."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("app.log", b"\x00" * (30 * 1024 * 1024))
    return out.getvalue()


def broken_utf8() -> bytes:
    return "디스크 경고: /var 95%\n".encode() + b"\xff\xfe\xfd broken\n"


SVG_WITH_SCRIPT = (
    b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg">'
    b"<script>alert(document.cookie)</script></svg>\n"
)

LOG = (
    "2026-12-06T10:00:01Z nginx[812]: upstream timed out (110) while reading response\n"
    "2026-12-06T10:00:02Z portal[44]: GC pause 2300 ms\n"
    "2026-12-06T10:00:03Z portal[44]: OutOfMemoryError: Java heap space\n"
)
