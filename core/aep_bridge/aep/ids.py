"""Event ids (ULIDs, AEP-0001 §5.1 #2) and `aep://` source URIs (#6)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

from ulid import ULID


def new_id() -> str:
    """A fresh ULID: unique, and sortable by the time it was made."""
    return str(ULID())


def source_uri(host: str, agent: str, session: str | None = None) -> str:
    """`aep://{host}/agent/{agent}[/session/{session}]`, each part percent-encoded.

    Session ids are producer-controlled strings with no charset guarantee (AEP-0003 §9.6),
    so they are encoded rather than trusted to be URI-safe.
    """
    uri = f"aep://{quote(host, safe='')}/agent/{quote(agent, safe='')}"
    if session is not None:
        uri += f"/session/{quote(session, safe='')}"
    return uri


@dataclass(frozen=True, slots=True)
class SourceParts:
    host: str
    agent: str
    session: str | None = None


def parse_source(uri: str) -> SourceParts | None:
    """The parts of a source in the RECOMMENDED form, or None for any other URI.

    Other forms are legal (the source is only required to be a URI), so None is not an error.
    """
    parts = urlsplit(uri)
    if parts.scheme != "aep" or not parts.netloc:
        return None
    segments = parts.path.split("/")[1:]
    if len(segments) == 2 and segments[0] == "agent":
        return SourceParts(unquote(parts.netloc), unquote(segments[1]))
    if len(segments) == 4 and segments[0] == "agent" and segments[2] == "session":
        return SourceParts(unquote(parts.netloc), unquote(segments[1]), unquote(segments[3]))
    return None
