"""Type stub of the C extension copapy._dispatch (runner/python/dispatch.c)."""

from collections.abc import Callable
from typing import Any

class Dispatcher:
    """Base of jitted functions: tries the fast plan, else calls ``_dispatch``."""

    _fast_hits: int

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def _dispatch(self, *args: Any, **kwargs: Any) -> Any: ...
    def _set_fast(self, invoke: Callable[..., Any], inputs: tuple[Any, ...],
                  outputs: tuple[Any, ...], post: Callable[[tuple[Any, ...]], Any] | None,
                  unwrap: bool, /) -> None: ...
    def _clear_fast(self) -> None: ...
