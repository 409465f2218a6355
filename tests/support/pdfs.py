"""PDFs built by hand for tests and benches (no binary fixtures): a normal one, a long one and
a crafted one that is tiny but slow to read."""

from __future__ import annotations

import io
import zlib


def assemble(objects: list[bytes]) -> bytes:
    """A PDF of ``objects`` (object 1 is the catalog) with a correct cross-reference table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    trailer = b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n"
    out.write(trailer % (len(objects) + 1, xref))
    return out.getvalue()


def _pages(contents: list[int], font: int) -> list[bytes]:
    """Page objects (their parent is object 2), the n-th drawing the stream object contents[n]."""
    return [
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
        b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (stream, font)
        for stream in contents
    ]


HELVETICA = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def pages_pdf(texts: list[str]) -> bytes:
    """A PDF with one page per text (Helvetica)."""
    count = len(texts)
    # objects: 1 catalog, 2 pages, 3 font, then the streams, then the pages
    streams = [
        b"<< /Length %d >>\nstream\n" % len(body) + body + b"\nendstream"
        for body in (f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode() for text in texts)
    ]
    first_page = 4 + count
    kids = b" ".join(b"%d 0 R" % (first_page + n) for n in range(count))
    return assemble(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % count,
            HELVETICA,
            *streams,
            *_pages([4 + n for n in range(count)], 3),
        ]
    )


def slow_pdf(pages: int = 20, operators: int = 20_000) -> bytes:
    """A few kilobytes that take pypdf seconds per page: every page's /Contents is the same
    FlateDecode stream of ``operators`` text operators that show nothing (no text to cut by)."""
    drawn = b"BT /F1 1 Tf 1 0 0 1 0 0 Tm () Tj ET\n" * operators
    packed = zlib.compress(drawn, 9)
    stream = b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed)
    kids = b" ".join(b"%d 0 R" % (5 + n) for n in range(pages))
    return assemble(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % pages,
            HELVETICA,
            stream + packed + b"\nendstream",
            *_pages([4] * pages, 3),
        ]
    )
