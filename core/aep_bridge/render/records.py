"""The optional profiles' records: `state.*`, `resource.*`, `assessment.*` (verbose only)."""

from __future__ import annotations

from ..aep.payloads.optional import (
    AssessmentEvaluationRecorded,
    AssessmentFeedbackReceived,
    AssessmentGuardrailRecorded,
    ResourceCitationRecorded,
    ResourceRetrievalRequested,
    ResourceRetrievalReranked,
    ResourceRetrievalReturned,
    StateDelta,
    StateSnapshot,
)
from .activity import duration
from .base import RendererBase
from .draft import Draft
from .helpers import VERBOSE, _compact, _typed


class RecordsMixin(RendererBase):
    """`state.snapshot`, `state.delta`, `resource.retrieval.*`, `resource.citation.recorded`,
    `assessment.*`."""

    def _state_snapshot(self, d: Draft) -> None:
        p = _typed(d.event, StateSnapshot)
        detail = None
        if p is not None and p.state:
            detail = self._line(", ".join(f"{k}={_compact(v)}" for k, v in p.state.items()))
        self._state(d, p, " (rev {})", detail)

    def _state_delta(self, d: Draft) -> None:
        p = _typed(d.event, StateDelta)
        detail = None
        if p is not None and p.delta:
            ops = []
            for op in p.delta[:5]:
                step = " ".join(str(op.get(k, "")) for k in ("op", "path") if op.get(k))
                if "value" in op:
                    step += f" = {_compact(op['value'])}"
                ops.append(step)
            more = f" (and {len(p.delta) - 5} more)" if len(p.delta) > 5 else ""
            detail = self._line("; ".join(ops)) + more
        self._state(d, p, " → rev {}", detail)

    def _state(
        self, d: Draft, p: StateSnapshot | StateDelta | None, rev: str, detail: str | None
    ) -> None:
        """A `state.*` line: the state's name, its revision (`rev` with it), then `detail` if any;
        keyed by the state, so its next snapshot or delta replaces it."""
        name = self._line(p.key, 60) if p is not None and p.key else "state"
        text = f"State {name}" if name != "state" else "State"
        if p is not None and p.rev is not None:
            text += rev.format(p.rev)
        if detail is not None:
            text += ": " + detail
        d.add(VERBOSE, "system_message", text, key=f"state:{p.key if p and p.key else 'state'}")

    def _retrieval_requested(self, d: Draft) -> None:
        p = _typed(d.event, ResourceRetrievalRequested)
        text = "Retrieval"
        if p is not None and p.corpus:
            text += " from " + self._line(p.corpus, 60)
        if p is not None and p.top_k is not None:
            text += f" (top {p.top_k})"
        if p is not None and p.query:
            text += ": " + self._line(p.query)
        d.add(VERBOSE, "system_message", text)

    def _retrieval_returned(self, d: Draft) -> None:
        p = _typed(d.event, ResourceRetrievalReturned)
        count = None
        if p is not None:
            count = p.count if p.count is not None else (len(p.documents) if p.documents else None)
        text = "Retrieved " + (
            f"{count} document{'s' if count != 1 else ''}" if count is not None else "documents"
        )
        if p is not None and p.corpus:
            text += " from " + self._line(p.corpus, 60)
        if p is not None and p.duration_ms is not None:
            text += f" in {duration(p.duration_ms)}"
        d.add(VERBOSE, "system_message", text)

    def _retrieval_reranked(self, d: Draft) -> None:
        p = _typed(d.event, ResourceRetrievalReranked)
        text = "Reranked"
        if p is not None and p.model:
            text += " with " + self._line(p.model, 60)
        if p is not None and p.count is not None:
            text += f": kept {p.count}"
        if p is not None and p.duration_ms is not None:
            text += f" in {duration(p.duration_ms)}"
        if p is not None and p.query:
            text += " for " + self._line(p.query)
        d.add(VERBOSE, "system_message", text)

    def _citations(self, d: Draft) -> None:
        p = _typed(d.event, ResourceCitationRecorded)
        citations = (p.citations or []) if p is not None else []
        count = p.count if p is not None and p.count is not None else len(citations)
        text = f"{count} citation" + ("" if count == 1 else "s")
        names = []
        for citation in citations[:5]:
            source = citation.source
            if source is not None:
                name = self._line(source.title or source.id or source.uri, 60)
                if name:
                    names.append(name)
        if names:
            text += ": " + ", ".join(names)
        d.add(VERBOSE, "system_message", text)

    def _evaluation(self, d: Draft) -> None:
        p = _typed(d.event, AssessmentEvaluationRecorded)
        text = "Evaluation"
        if p is not None:
            if p.name:
                text += " " + self._line(p.name, 60)
            verdict = [f"{p.score_value:g}" if p.score_value is not None else ""]
            verdict.append(self._line(p.score_label, 40) if p.score_label else "")
            if any(verdict):
                text += ": " + " ".join(x for x in verdict if x)
            if p.evaluator:
                text += " by " + self._line(p.evaluator, 60)
            if p.explanation:
                text += " — " + self._line(p.explanation)
        d.add(VERBOSE, "system_message", text)

    def _feedback(self, d: Draft) -> None:
        p = _typed(d.event, AssessmentFeedbackReceived)
        text = "Feedback"
        if p is not None:
            if p.source:
                text += f" ({self._line(p.source, 40)})"
            verdict = [self._line(p.label, 40) if p.label else ""]
            verdict.append(f"rating {p.rating:g}" if p.rating is not None else "")
            if any(verdict):
                text += ": " + ", ".join(x for x in verdict if x)
            if p.comment:
                text += " — " + self._line(p.comment)
            if p.correction:
                text += "\nCorrection: " + self._line(p.correction)
        d.add(VERBOSE, "system_message", text)

    def _guardrail(self, d: Draft) -> None:
        p = _typed(d.event, AssessmentGuardrailRecorded)
        guard = p.guardrail if p is not None else None
        text = "Guardrail"
        if guard is not None:
            if guard.verdict:
                text += f" {guard.verdict}"
            if guard.stage:
                text += f" {guard.stage}"
            names = [self._line(c.name, 40) for c in guard.categories or [] if c.name]
            if names:
                text += ": " + ", ".join(names)
            if guard.detector is not None and guard.detector.name:
                text += f" ({self._line(guard.detector.name, 60)})"
            if guard.explanation:
                text += " — " + self._line(guard.explanation)
        d.add(VERBOSE, "system_message", text)
