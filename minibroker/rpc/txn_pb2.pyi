from minibroker.rpc import errors_pb2 as _errors_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class VerifyPartitionsInTxnRequest(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "topics")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    topics: _containers.RepeatedCompositeFieldContainer[TxnMarkerTopic]
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TxnMarkerTopic, _Mapping]]] = ...) -> None: ...

class VerifyPartitionsInTxnResponse(_message.Message):
    __slots__ = ("error_code", "topics")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    topics: _containers.RepeatedCompositeFieldContainer[TxnMarkerTopicResult]
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., topics: _Optional[_Iterable[_Union[TxnMarkerTopicResult, _Mapping]]] = ...) -> None: ...

class WriteTxnMarkersRequest(_message.Message):
    __slots__ = ("markers",)
    MARKERS_FIELD_NUMBER: _ClassVar[int]
    markers: _containers.RepeatedCompositeFieldContainer[TxnMarkerEntry]
    def __init__(self, markers: _Optional[_Iterable[_Union[TxnMarkerEntry, _Mapping]]] = ...) -> None: ...

class TxnMarkerEntry(_message.Message):
    __slots__ = ("producer_id", "producer_epoch", "transaction_result", "topics", "coordinator_epoch")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_RESULT_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    producer_epoch: int
    transaction_result: bool
    topics: _containers.RepeatedCompositeFieldContainer[TxnMarkerTopic]
    coordinator_epoch: int
    def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., transaction_result: _Optional[bool] = ..., topics: _Optional[_Iterable[_Union[TxnMarkerTopic, _Mapping]]] = ..., coordinator_epoch: _Optional[int] = ...) -> None: ...

class TxnMarkerTopic(_message.Message):
    __slots__ = ("name", "partition_indexes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITION_INDEXES_FIELD_NUMBER: _ClassVar[int]
    name: str
    partition_indexes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., partition_indexes: _Optional[_Iterable[int]] = ...) -> None: ...

class WriteTxnMarkersResponse(_message.Message):
    __slots__ = ("markers",)
    MARKERS_FIELD_NUMBER: _ClassVar[int]
    markers: _containers.RepeatedCompositeFieldContainer[TxnMarkerResult]
    def __init__(self, markers: _Optional[_Iterable[_Union[TxnMarkerResult, _Mapping]]] = ...) -> None: ...

class TxnMarkerResult(_message.Message):
    __slots__ = ("producer_id", "topics")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    topics: _containers.RepeatedCompositeFieldContainer[TxnMarkerTopicResult]
    def __init__(self, producer_id: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TxnMarkerTopicResult, _Mapping]]] = ...) -> None: ...

class TxnMarkerTopicResult(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[TxnMarkerPartitionResult]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[TxnMarkerPartitionResult, _Mapping]]] = ...) -> None: ...

class TxnMarkerPartitionResult(_message.Message):
    __slots__ = ("partition_index", "error_code")
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    partition_index: int
    error_code: _errors_pb2.ErrorCode
    def __init__(self, partition_index: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ...) -> None: ...
