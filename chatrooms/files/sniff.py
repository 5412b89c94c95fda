"""What an uploaded file really is: its bytes decide, never its name or claimed type.

Images are recognised by their magic bytes and their pixel size is read from the header
(PNG IHDR, GIF screen, JPEG SOFn, WebP VP8/VP8L/VP8X): the server never decodes an image,
so a decompression bomb costs nothing here and the size limit applies before anything.
Text is decoded strictly: UTF-8 (a BOM dropped), UTF-16 with a BOM, or — when the bytes
hold no UTF-8 sequence at all — the legacy encoding charset-normalizer finds (a cp949 or
latin-1 log). Broken UTF-8 (valid sequences mixed with invalid bytes) is refused.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

IMAGE_TYPES = {
    "png": "image/png",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
}
IMAGE_EXTENSIONS = {"png": "png", "jpg": "jpeg", "jpeg": "jpeg", "gif": "gif", "webp": "webp"}
# Formats refused by name or claimed type whatever their bytes (an SVG can carry script).
REFUSED_EXTENSIONS = {"svg", "svgz", "html", "htm", "xhtml", "exe", "dll", "so", "bin"}
REFUSED_TYPES = {"image/svg+xml", "text/html", "application/xhtml+xml"}
# Binary containers a text claim must not hide (a zip bomb named .log).
_CONTAINERS = (
    (b"\x1f\x8b", "gzip"),
    (b"PK\x03\x04", "zip"),
    (b"PK\x05\x06", "zip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"Rar!\x1a\x07", "rar"),
    (b"%PDF-", "pdf"),
    (b"\x7fELF", "elf"),
)
_SVG = re.compile(rb"<svg[\s>]", re.IGNORECASE)
_UTF8_MULTIBYTE = re.compile(rb"[\xc2-\xf4][\x80-\xbf]+")


@dataclass(frozen=True)
class Image:
    """A recognised image: its format and its pixel size from the header."""

    format: str
    width: int
    height: int

    @property
    def media_type(self) -> str:
        return IMAGE_TYPES[self.format]


@dataclass(frozen=True)
class Text:
    """A decoded text file: the text, the encoding it was read in, its line count."""

    text: str
    encoding: str
    lines: int


class NotText(Exception):
    """Bytes that are not a text file; `code` says why (binary, encoding)."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(code)
        self.code = code
        self.detail = detail


def image_format(data: bytes) -> str | None:
    """The image format the magic bytes name, or None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def container(data: bytes) -> str | None:
    """The archive or binary format the magic bytes name (gzip, zip, pdf, ...), or None."""
    for magic, name in _CONTAINERS:
        if data.startswith(magic):
            return name
    return None


def looks_like_svg(data: bytes) -> bool:
    return bool(_SVG.search(data[:4096]))


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            at += 2
            continue
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if at + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        at += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width = 1 + int.from_bytes(data[24:27], "little")
        height = 1 + int.from_bytes(data[27:30], "little")
        return width, height
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    return None


def read_image(data: bytes) -> Image | None:
    """The image these bytes are, with its header's pixel size; None when not an image
    or when the header cannot be read (a truncated or forged file)."""
    fmt = image_format(data)
    size: tuple[int, int] | None = None
    if fmt == "png" and len(data) >= 24 and data[12:16] == b"IHDR":
        size = struct.unpack(">II", data[16:24])
    elif fmt == "gif" and len(data) >= 10:
        size = struct.unpack("<HH", data[6:10])
    elif fmt == "jpeg":
        size = _jpeg_size(data)
    elif fmt == "webp":
        size = _webp_size(data)
    if fmt is None or size is None or min(size) <= 0:
        return None
    return Image(fmt, size[0], size[1])


def count_lines(text: str) -> int:
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def read_text(data: bytes) -> Text:
    """The text these bytes hold; NotText("attachment_binary" | "attachment_encoding")."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise NotText("attachment_encoding", f"UTF-16 byte {exc.start}") from exc
        return _text(text, "utf-16")
    if b"\x00" in data:
        raise NotText("attachment_binary")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if _UTF8_MULTIBYTE.search(data):
            # UTF-8 with broken bytes: guessing another encoding would garble the good part.
            raise NotText("attachment_encoding", f"invalid UTF-8 at byte {exc.start}") from exc
        text, encoding = _legacy(data)
        return _text(text, encoding)
    return _text(text, "utf-8")


def _legacy(data: bytes) -> tuple[str, str]:
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    if best is None or best.encoding is None:
        raise NotText("attachment_encoding", "no text encoding fits")
    return str(best), best.encoding


def _text(text: str, encoding: str) -> Text:
    # Control characters other than tab, newline, carriage return and form feed: binary.
    controls = sum(1 for ch in text[:65536] if ord(ch) < 32 and ch not in "\t\n\r\f\x1b")
    if controls > max(8, len(text[:65536]) // 100):
        raise NotText("attachment_binary")
    return Text(text.replace("\r\n", "\n"), encoding, count_lines(text))
