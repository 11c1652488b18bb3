"""Errors as TF Serving reports them: a canonical code, an HTTP status and a gRPC code."""
from __future__ import annotations

import grpc

# The google.rpc code -> HTTP mapping that TF Serving's REST handler uses.
HTTP_STATUS = {
    "OK": 200, "CANCELLED": 499, "UNKNOWN": 500, "INVALID_ARGUMENT": 400,
    "DEADLINE_EXCEEDED": 504, "NOT_FOUND": 404, "ALREADY_EXISTS": 409,
    "PERMISSION_DENIED": 403, "RESOURCE_EXHAUSTED": 429, "FAILED_PRECONDITION": 400,
    "ABORTED": 409, "OUT_OF_RANGE": 400, "UNIMPLEMENTED": 501, "INTERNAL": 500,
    "UNAVAILABLE": 503, "DATA_LOSS": 500, "UNAUTHENTICATED": 401,
}


class ServingError(Exception):
    """A request failed with a canonical error code (the name, e.g. "NOT_FOUND")."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        assert code in HTTP_STATUS, code
        self.code = code
        self.message = message

    @property
    def http_status(self) -> int:
        return HTTP_STATUS[self.code]

    @property
    def grpc_code(self) -> grpc.StatusCode:
        return getattr(grpc.StatusCode, self.code)


def invalid(message: str) -> ServingError:
    return ServingError("INVALID_ARGUMENT", message)


def not_found(message: str) -> ServingError:
    return ServingError("NOT_FOUND", message)


def unavailable(message: str) -> ServingError:
    return ServingError("UNAVAILABLE", message)


def from_tf_exception(exc: BaseException) -> ServingError:
    """Map an exception raised by a TF call to the code TF Serving would answer."""
    if isinstance(exc, ServingError):
        return exc
    code = type(exc).__name__  # tf.errors.InvalidArgumentError -> INVALID_ARGUMENT
    names = {
        "InvalidArgumentError": "INVALID_ARGUMENT", "NotFoundError": "NOT_FOUND",
        "FailedPreconditionError": "FAILED_PRECONDITION", "ResourceExhaustedError": "RESOURCE_EXHAUSTED",
        "UnavailableError": "UNAVAILABLE", "DeadlineExceededError": "DEADLINE_EXCEEDED",
        "UnimplementedError": "UNIMPLEMENTED", "OutOfRangeError": "OUT_OF_RANGE",
        "TypeError": "INVALID_ARGUMENT", "ValueError": "INVALID_ARGUMENT",
    }
    if isinstance(exc, UnicodeDecodeError):
        # TF's Python wrapper decodes the C status message as UTF-8; a message quoting the request's own bytes (a
        # serialized tf.Example that does not parse) fails that decode: the request is at fault, not the server
        return ServingError("INVALID_ARGUMENT", "Could not parse example input: TensorFlow's error quotes bytes that "
                                                f"are not UTF-8 ({exc.reason} at byte {exc.start})")
    first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return ServingError(names.get(code, "INTERNAL"), first_line)
