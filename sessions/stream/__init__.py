"""The read side of the event log and the websockets that carry it.

- `read`: reading the log (`read_events`, `events_after`), the one JSON form of an event
  (`serialize`, byte for byte what `read_events` splices on PostgreSQL), the seq a reader says it
  has (`parse_after`) and the websocket's `events` frames. The websocket, the SSE endpoint
  (api.stream), the REST API and the CLI all read through it.
- `tail`: the newest events of a watched session, read and encoded once for all its viewers;
  the new events of every watched session are read together (TailReader).
- `probe`: whether a daphne socket's output is backed up (ASGI has no backpressure).
- `base`: what every websocket consumer shares: close codes, refusals, who the user is.
- `session_socket`, `terminal_socket`, `preview_socket`: the consumers (sessions.routing).
"""
