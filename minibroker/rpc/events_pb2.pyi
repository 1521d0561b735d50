from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class StreamEventsRequest(_message.Message):
    __slots__ = ("since_ms", "follow", "after_boot_id", "after_seq", "skip_routine")
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    AFTER_BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    SKIP_ROUTINE_FIELD_NUMBER: _ClassVar[int]
    since_ms: int
    follow: bool
    after_boot_id: str
    after_seq: int
    skip_routine: bool
    def __init__(self, since_ms: _Optional[int] = ..., follow: _Optional[bool] = ..., after_boot_id: _Optional[str] = ..., after_seq: _Optional[int] = ..., skip_routine: _Optional[bool] = ...) -> None: ...

class EventRecord(_message.Message):
    __slots__ = ("boot_id", "seq", "ts_ms", "json")
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TS_MS_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    boot_id: str
    seq: int
    ts_ms: int
    json: str
    def __init__(self, boot_id: _Optional[str] = ..., seq: _Optional[int] = ..., ts_ms: _Optional[int] = ..., json: _Optional[str] = ...) -> None: ...
