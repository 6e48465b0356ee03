"""An `output` event's log item is written without the template engine (the live stream renders
thousands a second); it must be byte for byte what the templates render, whatever the payload,
and a payload of another shape goes through the templates."""

import pytest
from django.template.loader import render_to_string

from sessions import rendering
from sessions.models import Event

PAYLOADS = [
    {"stream": "stdout", "text": "INFO tests/test_widgets.py PASSED [ 42%]"},
    {"stream": "stderr", "text": "<script>alert('x')</script> & \"quoted\" {{ not a tag }}"},
    {"stream": "agent", "text": "ünïcödé ✓ 漢字 \u2028 tab\tand\nnew line\r\n"},
    {"stream": 'std"out<>', "text": ""},
    {"text": "no stream"},
    {"stream": "stdout"},
    {},
    {"stream": "stdout", "text": "x", "t": 1.5, "n": 3, "turn": 2},
]
ODD_PAYLOADS = [
    {"stream": None, "text": "a"},
    {"stream": "stdout", "text": 42},
    {"stream": "stdout", "text": ["a", "<b>"]},
    {"stream": "stdout", "text": None},
    ["not", "a", "dict"],
    "just text",
]


def template_item(event: Event) -> str:
    context = {"event": event, "body": rendering.event_template(event.kind)}
    return render_to_string("sessions/_event.html", context)


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("seq", [1, 999, 1234567, 900_000_000_123])
def test_the_output_item_is_the_templates_bytes(payload, seq):
    event = Event(session_id=1, seq=seq, kind="output", payload=payload)
    item = rendering._output_item(event)
    assert item is not None  # the fast path took it
    assert item == template_item(event)
    assert rendering.render_event(event) == item


@pytest.mark.parametrize("payload", ODD_PAYLOADS)
def test_an_output_of_another_shape_is_rendered_by_the_template(payload):
    event = Event(session_id=1, seq=7, kind="output", payload=payload)
    assert rendering._output_item(event) is None
    assert rendering.render_event(event) == template_item(event)


def test_the_output_item_escapes_what_the_agent_wrote():
    event = Event(session_id=1, seq=3, kind="output", payload={"stream": "x", "text": "<b>&'"})
    assert "&lt;b&gt;&amp;&#x27;" in rendering.render_event(event)
    assert "<b>" not in rendering.render_event(event)
