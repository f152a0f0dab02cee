"""Server-Sent Events read from a response body's bytes, as the HTML standard parses them
(lines end in CRLF, LF or CR; a line starting with ``:`` is a comment; a blank line ends a
message), one message at a time, each with the fields it carries itself.

Why not ``httpx-sse``: it parses as an ``EventSource`` does, which carries the last ``id`` seen
into every later message and drops comments. A heartbeat after an event (``: keep-alive``, then a
blank line) then comes out as a message with that event's id and no data, just like the feed's
planned end of a connection (``: end budget last-event-id=41-7``, then ``id: 41-7`` alone, after
which the client resumes from 41-7 at once). Told apart only by a message's own ``id`` field, which
this parser keeps: ``kya.feed`` reconnects at once after a planned end, and after the stream's
``retry`` when a connection broke."""

from __future__ import annotations

import codecs
import re
from typing import List, NamedTuple, Optional

_LINE_END = re.compile(r"\r\n|\r|\n")


class Message(NamedTuple):
    """One message. ``id``: its own ``id`` field (``None`` without one); ``data``: its ``data``
    lines joined by newlines (``None`` without any: the message dispatches no event);
    ``retry``: its ``retry`` field in milliseconds (``None`` without a valid one)."""

    id: Optional[str]
    event: str
    data: Optional[str]
    retry: Optional[int]


class MessageReader:
    """Feed it a stream's bytes as they arrive; it returns the messages each chunk completes. A
    message the stream ends inside (no blank line after it) is never returned: a connection cut
    in the middle of a message gave nothing to act on."""

    def __init__(self) -> None:
        # The standard decodes the stream as UTF-8 whatever its charset says.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._rest = ""
        # The last chunk ended in a CR: a LF first in the next one ends no other line.
        self._after_cr = False
        self._id: Optional[str] = None
        self._event = ""
        self._data: List[str] = []
        self._retry: Optional[int] = None

    def feed(self, chunk: bytes) -> List[Message]:
        text = self._rest + self._decoder.decode(chunk)
        if self._after_cr and text.startswith("\n"):
            text = text[1:]
        self._after_cr = False
        messages: List[Message] = []
        start = 0
        for end in _LINE_END.finditer(text):
            message = self._line(text[start : end.start()])
            if message is not None:
                messages.append(message)
            start = end.end()
            self._after_cr = end.group() == "\r" and start == len(text)
        self._rest = text[start:]
        return messages

    def _line(self, line: str) -> Optional[Message]:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id = value
        elif field == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> Optional[Message]:
        data = "\n".join(self._data) if self._data else None
        message = None
        if data is not None or self._id is not None or self._retry is not None:
            message = Message(self._id, self._event or "message", data, self._retry)
        self._id, self._event, self._data, self._retry = None, "", [], None
        return message
