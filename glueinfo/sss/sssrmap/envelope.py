"""SSSRMAP envelopes: Response bytes, signing, and checking a request's signature.

Signatures (message format 3.0.3): DigestValue = base64(SHA1(serialized
``<Body>``)), SignatureValue = base64(HMAC-SHA1(key, raw digest)),
``<SecurityToken type="Symmetric" name="actor"/>``.  With a key, requests
must be signed and responses are.

Responses are written as bytes, not built as trees: the records inside are
already serialized by the engine.  Status codes are in status.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Sequence
from typing import Optional, Union

from lxml import etree

from glueinfo.core.xmlsafe import escape_attribute, escape_text
from glueinfo.sss.sssrmap.status import BAD_SIGNATURE, SIGNATURE_REQUIRED, UNSUPPORTED_TOKEN, SSSRMAPError


def response_bytes(value: str, code: str, message: str, records: Optional[Sequence[bytes]] = None,
                   request_id: Optional[str] = None, chunk: Optional[tuple[int, int]] = None) -> bytes:
    """A serialized ``<Response>``: Status, and Count + Data when there are records (even none)."""
    attributes = ""
    if request_id is not None:
        attributes += f' id="{escape_attribute(request_id)}"'
    if chunk is not None:
        attributes += f' chunkNum="{chunk[0]}" chunkMax="{chunk[1]}"'
    parts = [f"<Response{attributes}><Status><Value>{value}</Value><Code>{code}</Code>"
             f"<Message>{escape_text(message)}</Message></Status>".encode()]
    if records is not None:
        parts.append(f"<Count>{len(records)}</Count>".encode())
        parts.append(b"<Data>" + b"".join(records) + b"</Data>" if records else b"<Data/>")
    parts.append(b"</Response>")
    return b"".join(parts)


def failure_bytes(code: str, message: str, request_id: Optional[str] = None) -> bytes:
    return response_bytes("Failure", code, message, None, request_id)


def digest(body: bytes) -> bytes:
    """The raw 20-byte SHA1 digest of a serialized Body."""
    return hashlib.sha1(body).digest()


def signature(key: bytes, body: bytes) -> tuple[str, str]:
    """(DigestValue, SignatureValue) for a serialized Body, both base64."""
    raw = digest(body)
    return (base64.b64encode(raw).decode("ascii"),
            base64.b64encode(hmac.new(key, raw, hashlib.sha1).digest()).decode("ascii"))


def envelope(body_content: bytes, key: Optional[bytes] = None, actor: str = "glueinfo") -> bytes:
    """``<Envelope><Body>content</Body>[<Signature>..</Signature>]</Envelope>``, signed when a key is given."""
    body = b"<Body>" + body_content + b"</Body>"
    if key is None:
        return b"<Envelope>" + body + b"</Envelope>"
    digest_value, signature_value = signature(key, body)
    token = f'<SecurityToken type="Symmetric" name="{escape_attribute(actor)}"/>'
    return (b"<Envelope>" + body + f"<Signature><DigestValue>{digest_value}</DigestValue>"
            f"<SignatureValue>{signature_value}</SignatureValue>{token}</Signature></Envelope>".encode())


def request_envelope(request: Union[bytes, str], key: Optional[bytes] = None, actor: str = "glueinfo") -> bytes:
    """A client's request envelope around serialized ``<Request>`` bytes (used by tests and peers)."""
    if isinstance(request, str):
        request = request.encode("utf-8")
    return envelope(request, key, actor)


_RAW_BODY = re.compile(rb"<Body\b.*</Body\s*>", re.DOTALL)


def verify_signature(root: etree._Element, raw: bytes, key: Optional[bytes]) -> None:
    """Check the Envelope's Signature; SSSRMAPError (4xx) when it is missing (with a key) or wrong."""
    sig = root.find("Signature")
    if sig is None:
        if key is not None:
            raise SSSRMAPError(SIGNATURE_REQUIRED, "this service requires signed requests: the Envelope has no Signature")
        return
    token = sig.find("SecurityToken")
    if token is not None and (token.get("type") or "Symmetric").lower() != "symmetric":
        raise SSSRMAPError(UNSUPPORTED_TOKEN, f"SecurityToken type {token.get('type')!r} is not supported (only Symmetric)")
    digest_text = (sig.findtext("DigestValue") or "").strip()
    signature_text = (sig.findtext("SignatureValue") or "").strip()
    if key is not None and (not digest_text or not signature_text):
        raise SSSRMAPError(BAD_SIGNATURE, "the Signature needs both DigestValue and SignatureValue")
    if not digest_text:
        return
    try:
        claimed = base64.b64decode(digest_text, validate=True)
        claimed_signature = base64.b64decode(signature_text, validate=True) if signature_text else b""
    except ValueError:
        raise SSSRMAPError(BAD_SIGNATURE, "DigestValue or SignatureValue is not base64") from None
    body = root.find("Body")
    candidates = [etree.tostring(body, encoding="UTF-8", with_tail=False)] if body is not None else []
    match = _RAW_BODY.search(raw)
    if match:
        candidates.append(match.group(0))
    actual = next((digest(c) for c in candidates if hmac.compare_digest(digest(c), claimed)), None)
    if actual is None:
        raise SSSRMAPError(BAD_SIGNATURE, "DigestValue does not match the Body: the request was altered or badly serialized")
    if key is not None:
        expected = hmac.new(key, actual, hashlib.sha1).digest()
        if not hmac.compare_digest(expected, claimed_signature):
            raise SSSRMAPError(BAD_SIGNATURE, "SignatureValue does not match: wrong key or altered request")
