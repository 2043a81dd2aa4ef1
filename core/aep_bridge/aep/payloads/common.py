"""The payload base class and the common objects several types share (AEP-0002 §5.2)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from .._types import JsonInt, NonNegInt, NonNegNumber, Opt, gated, opt
from ..rules import rule_error


class Payload(BaseModel):
    """A `data` object: open (vendor fields pass, AEP-0002 §5.4), strict JSON types.

    Field names are the wire names; dotted OpenTelemetry names are aliases, and only the
    alias is accepted, so an unrelated vendor key can never fill a typed field.
    """

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    def to_data(self) -> dict[str, Any]:
        """The wire form: aliases, no absent optionals, no nulls."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class ToolRef(Payload):
    """`tool_ref`: which tool, and the call id that pairs its start and finish."""

    name: str
    call_id: Opt[str] = None


class ErrorInfo(Payload):
    """`error_info`: a machine error type and a human message (free text, so gated)."""

    type: Opt[str] = None
    message: Opt[str] = gated("redacted")


class Cost(Payload):
    """`cost`: emitter-asserted money, always with its ISO 4217 currency."""

    currency: str
    total: Opt[NonNegNumber] = None
    prompt: Opt[NonNegNumber] = None
    completion: Opt[NonNegNumber] = None
    cache: Opt[NonNegNumber] = None
    reasoning: Opt[NonNegNumber] = None


class Usage(Payload):
    """`usage`: token counts under their OpenTelemetry GenAI names, flat in `data`."""

    input_tokens: Opt[NonNegInt] = opt(alias="gen_ai.usage.input_tokens")
    output_tokens: Opt[NonNegInt] = opt(alias="gen_ai.usage.output_tokens")


class Accounted(Usage):
    """A payload carrying both `usage` and `cost`."""

    cost: Opt[Cost] = None


class Option(Payload):
    """A closed-choice answer; at capture `metadata` the label is a structural placeholder."""

    id: str
    label: str


class FieldSpec(Payload):
    """`field_spec` (AEP-0006): one flat, typed field of a `kind: "form"` request."""

    id: str
    type: Literal["string", "number", "boolean", "select"]
    label: str
    required: Opt[bool] = None
    multi: Opt[bool] = None
    other: Opt[bool] = None
    choices: Opt[list[Option]] = None
    min: Opt[float] = None
    max: Opt[float] = None

    @model_validator(mode="after")
    def _select_has_choices(self) -> FieldSpec:
        if self.type == "select" and self.choices is None:
            raise rule_error("AEP-0002 §5.2", f"select field {self.id!r} must list its choices")
        return self


class Answer(Payload):
    """The answer of `attention.answered` and `control.attention.respond`."""

    option: Opt[str] = None
    text: Opt[str] = gated("redacted")
    values: Opt[dict[str, Any]] = None


class Document(Payload):
    """`document`: one retrieved document's provenance; its text is gated."""

    id: Opt[str] = None
    score: Opt[float] = None
    content_redacted: Opt[str] = gated("redacted")
    content: Opt[str] = gated("full")
    metadata: Opt[dict[str, Any]] = None


class CitationSource(Payload):
    id: Opt[str] = None
    uri: Opt[str] = gated("redacted")
    title: Opt[str] = gated("redacted")


class CharSpan(Payload):
    start: Opt[JsonInt] = None
    end: Opt[JsonInt] = None


class PageSpan(CharSpan):
    page: Opt[JsonInt] = None


class BlockSpan(CharSpan):
    block: Opt[JsonInt] = None


class CitationOffset(Payload):
    char: Opt[CharSpan] = None
    page: Opt[PageSpan] = None
    block: Opt[BlockSpan] = None


class Citation(Payload):
    """`citation`: a span of a produced answer bound to the source it cites."""

    source: Opt[CitationSource] = None
    cited_text_redacted: Opt[str] = gated("redacted")
    cited_text: Opt[str] = gated("full")
    offset: Opt[CitationOffset] = None
    document_index: Opt[NonNegInt] = None


class GuardrailCategory(Payload):
    name: Opt[str] = None
    score: Opt[float] = None


class Detector(Payload):
    name: Opt[str] = None
    version: Opt[str] = None


class Guardrail(Payload):
    """`guardrail`: an automated content-safety verdict already taken."""

    stage: Opt[Literal["input", "output"]] = None
    verdict: Opt[Literal["allowed", "flagged", "blocked", "modified"]] = None
    categories: Opt[list[GuardrailCategory]] = None
    detector: Opt[Detector] = None
    explanation: Opt[str] = gated("redacted")


class SessionRef(Payload):
    """A session lineage handle (`session.started.parent`)."""

    session: str
    run: Opt[str] = None
    agent: Opt[str] = None


class ChildRef(Payload):
    """A subagent's lineage handle (`delegation.*.child`)."""

    session: Opt[str] = None
    run: Opt[str] = None
    agent: Opt[str] = None


class TaskRef(Payload):
    id: Opt[str] = None
    title: Opt[str] = gated("redacted")
