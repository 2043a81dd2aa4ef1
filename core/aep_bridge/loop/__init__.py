"""The bridge loop: events in, messages and cards out, answers back to the agent exactly once.
`bridge.py` wires it (`Bridge`: the mirror of sessions into threads, the question cards, the
channels); the parts it holds own their state: sessions, attention and its records, who may
answer (approvers, quorum), away mode, chat commands, the audit trail, retention."""
