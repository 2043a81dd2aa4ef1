"""The outbox: one scheduler per channel instance, between the core and a platform.

Every call the core makes to a platform goes through its channel's outbox, because only one
place can know everything that decides when a call may go out: the platform's real limits
(per chat, per group of chats, per bot), which calls are waiting, which of them matter most,
and which have failed. Adapters therefore never sleep or retry (docs/architecture.md); they
raise `ChannelError` or `RateLimited` and the outbox decides.

What it guarantees, and why:

- **Never over a declared limit.** Each `RateLimit` is kept as a sliding window of the last
  calls (at most `count`, or `burst` when that is larger, in any `per_seconds`), plus a token
  bucket refilled at `count / per_seconds` when the platform declared a `burst`. A token
  bucket alone lets nearly twice `count` through in one window (a full bucket, then the
  refill), which is exactly what gets a Telegram bot a 429 or a ban; the window does not.
  A backlog still goes out at the full declared rate.
- **A budget is spent only on calls that are made.** A job the channel says it will not make
  (`ChannelAdapter.call_kind` None: a heads-up where it has no place for heads-ups) is never
  queued, persisted or counted, so nothing waits for a slot it would have taken. Where a
  platform counts edits apart from posts (`edit_rate_limits`: Slack's `chat.update`, Tier 3),
  an edit counts against those limits and a post against the others, not both in one window.
- **Questions before chatter.** The next call is the highest-priority one that may run now
  (lanes holding a card: the one whose first card was asked first).
  A waiting higher-priority call also reserves its share of the buckets it needs, so chatter
  in a free chat cannot take the last group slot a question is about to use. Every card
  still queued is owed a slot, not only the head of each lane: cards waiting behind a call
  in flight (a lane sends one at a time; for `OWED_WHILE` at most, so a hung call does not
  stop the channel) or in several sessions keep theirs, and no lower-priority call goes if
  it would make any of them wait longer.
- **Order per thread.** What a session's thread shows goes out in submit order, whatever its
  priority among other sessions, its cards included: a card never goes before (nor while) a
  message its session submitted before it, so a person reads what led to a question above
  it. It does not wait at their rank either: a card lifts its thread's messages queued ahead
  of it to its own rank (a lane ranks by its most urgent entry), so they and the card go
  before any other session's chatter, and the slots they need are owed to them as to the
  card; and the messages among them that look alike (one type and metadata, no attachment;
  keyed ones only as first posts, where the channel shows a card's context) are merged into
  one message where the platform's one-message limit allows (`merge`, persisted with the
  card), so that context costs about one call. Only a card's updates and the session's
  notifications overtake its thread (an update never overtakes its own card: it waits for
  it, `after`, as an edit of a message not sent yet would edit nothing). A call that waits
  for a retry holds back the calls behind it, a card included: a message its platform keeps
  refusing delays the session's next question too, as it delays everything else of that
  thread. A restart keeps this order: rows are read back in submit order into the same
  lanes.
- **A card in the first free slot.** Where the channel shows a card's context
  (`card_context`), the messages its session queued just before the card (none tried yet,
  within the platform's one-message limit) go in the card's own message instead of a slot
  each (`context`): the person reads what led to the question above it, and the card does
  not wait for them. An edit of a message shown before goes after the card, wherever it
  waits in the thread (it moves nothing a person reads; where the platform counts edits
  apart, as Slack's Tier 3, the card, a post, would otherwise wait for the budget of edits
  while every other session's posts went), its row and those behind the card written again
  after the card's; so does a first post the channel shows by editing a message it has
  (Slack's header, in its thread's parent); a later edit of a message the card carries
  goes into the card (the queued card, or its next update), cut at its end to fit the card
  if it outgrew it, never posted a second time below it; every update of the card carries
  its context. What each card carries is kept in the store with the rows it replaced, so a
  restart keeps it.
- **Latest text wins.** A job with a `coalesce` key replaces an unsent job with the same key
  (in the same session) in its place, so a burst of edits to one card costs one call. A
  keyed message merged with others (`merged`) is found again by its key: its later edit is
  the merged message drawn again, in its place while it waits, an edit of it once sent.
- **No late heads-up.** An unsent keyed job can be taken back (`withdraw`), its row deleted
  in the caller's transaction: the bridge withdraws a question's heads-up when the question
  closes, so an answer given before the heads-up's slot is not followed by a ringing
  "asks permission". One already in flight is not recalled.
- **A heads-up after its card.** A question's heads-up follows its card (`after`): it starts
  only once the card's job has gone, so it can link to the card's message.
- **No stale urgency.** A card's job is keyed too (`card_key`): when its question closes
  before it went out, the bridge lowers it to thread rank where it waits (`demote`, its row
  rewritten in the same transaction), so it stays where it was asked and no longer lifts
  its thread above other sessions' chatter.
- **Fits the platform.** Long text is split at the platform's limit in its own unit, without
  breaking a fenced code block; an edit of one card is cut to fit instead. A message with
  blocks is split between its blocks as the adapter measures them (`markup.split`), a block
  split inside keeping its structure.
- **Failures wait, then retry.** `RateLimited(retry_after)` pauses that job's chat (the whole
  channel when a job has no chat) and retries the job first when the pause ends (a wait
  that is no finite number, `inf` or `nan` as a header may say, pauses `UNREADABLE_WAIT`, 5 s).
  `ChannelError` is retried after about 1, 2, 4, ... up to 60 s, with jitter so that calls
  that failed together do not return together, while other threads carry on; a job is
  retried until it goes (the contract cannot say "never"), a `call` up to `max_attempts`.
  Any other exception is a bug in the adapter: logged with the job, retried up to
  `max_attempts`, then dropped and counted as `failed`.
- **Survives a restart.** A submitted job is in the `outbox` table before `submit` returns and
  is deleted only after the adapter call returned. A job in flight when the process dies is
  therefore sent again after the restart: the one repeat allowed. The deletes of settled
  calls ride on the next commit (`journal`): a call that returned just before a SIGKILL,
  whose delete had not committed yet, is sent again too. The calls still inside a
  limit's window are saved too (in wall-clock time) and counted again at the next start,
  clamped to that start's now if the wall clock was set back meanwhile; within a run, every
  window is on the monotonic clock.
- **Bounded.** On a channel with a declared limit, over `max_backlog` queued jobs, droppable
  chatter goes, oldest first, tool lines and thoughts before the agent's own words (said in
  one log line a minute at most); nothing else is ever dropped for space. A channel without
  a declared limit drops nothing: over `HIGH_WATER` it is `behind`, and the bridge stops
  taking events until it has `caught_up` (backpressure).
- **Threads before their questions.** A `call` for a held session (the one creating its
  thread) is ranked at least as the most urgent job waiting for that thread (`promote`).
  Once the thread is made (`release`), what the channel now shows by an edit (Slack's
  header, in the parent just made) goes after the session's card too: the card is the next
  post after its thread.

Logging names jobs by operation, session, row and priority, never by their text: the text may
carry what the platform was meant to see, and logs are not the platform.

The modules: `jobs` (what is queued and how it fits the platform), `limiter` (the declared
limits and their persistence), `journal` (the persisted rows), `lanes` (the queue) and
`merge` (what waits, in as few calls as fit), `merged` (the keyed parts of a merged
message, and their later edits), `context` (a card's context in its own message, where the
channel shows one), `scheduler` (the `Outbox`: lanes,
dispatch, settle). Markdown splitting is `aep_bridge.text.text`'s.
"""

from __future__ import annotations

from ..text.text import split_markdown, truncate_markdown
from .jobs import OPS, Job, Op, Priority, card_key
from .journal import LIMITS_SAVE_EVERY
from .queue import HIGH_WATER, LOW_WATER, SHED_REPORT_EVERY
from .scheduler import BACKOFF_CAP, JITTER, OWED_WHILE, Outbox

__all__ = [
    "BACKOFF_CAP",
    "HIGH_WATER",
    "JITTER",
    "LIMITS_SAVE_EVERY",
    "LOW_WATER",
    "OPS",
    "OWED_WHILE",
    "SHED_REPORT_EVERY",
    "Job",
    "Op",
    "Outbox",
    "Priority",
    "card_key",
    "split_markdown",
    "truncate_markdown",
]
