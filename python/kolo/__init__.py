"""kolo: data-parallel training in the style of Horovod.

``import kolo.torch as hvd`` gives Horovod's PyTorch API (docs/pytorch.md). This package
itself only loads the extension ``kolo._kolo``, the framework-neutral binding of kolo's C++
runtime.
"""
import os as _os
import sys as _sys

# Open MPI loads its transport plugins with dlopen and expects libmpi's symbols to be
# global; Python loads extensions with RTLD_LOCAL. Load ours (and with it libkolo and
# libmpi) globally, as mpi4py does.
_flags = _sys.getdlopenflags()
_sys.setdlopenflags(_flags | _os.RTLD_GLOBAL)
try:
    from . import _kolo  # noqa: F401
finally:
    _sys.setdlopenflags(_flags)

KoloError = _kolo.KoloError

__all__ = ["KoloError"]
