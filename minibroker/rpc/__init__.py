"""Generated gRPC and protobuf code. DO NOT EDIT.

Everything here except this file is produced from proto/ by `python scripts/gen_proto.py`;
the test suite fails when it is stale. Only minibroker/runtime/wire.py, the servicers and the
clients import it; the rest of the code sees dataclasses.
"""
