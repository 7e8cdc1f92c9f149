"""Horovod's process sets on kolo: ``ProcessSet``, ``global_process_set``,
``add_process_set``, ``remove_process_set`` (and ``init(process_sets=...)`` in mpi_ops).

A process set is a list of job ranks that runs collectives among itself; every collective
takes ``process_set=``. A set is registered collectively: every rank (members or not) passes
the same sets to ``init(process_sets=[...])`` or calls ``add_process_set`` with the same ranks
in the same order; kolo checks that they agree and raises KoloError on every rank if not.
Within a set, ranks are positions in its sorted ranks (``ps.rank()``); a broadcast root is a
job rank that must be a member, as in Horovod. Sets can always be added and removed at run
time (Horovod needs HOROVOD_DYNAMIC_PROCESS_SETS for that; kolo does not). The logic is
kolo's C++ runtime (kolo/process_set.h); see docs/collectives.md, "Process sets".
"""
from kolo import _kolo


class ProcessSet:
    """A set of job ranks. Unregistered (``process_set_id`` None) until passed to
    ``init(process_sets=...)`` or ``add_process_set``."""

    def __init__(self, ranks):
        self.ranks = sorted(int(r) for r in ranks)
        self.process_set_id = None

    def _registered(self):
        if self.process_set_id is None:
            raise ValueError("kolo.torch: ProcessSet(%s) is not registered; pass it to "
                             "init(process_sets=[...]) or add_process_set() first" % (self.ranks,))

    def size(self):
        """Number of ranks in the set."""
        self._registered()
        return len(self.ranks)

    def rank(self):
        """This process's rank within the set, or -1 if it is not a member."""
        self._registered()
        me = _kolo.rank()
        return self.ranks.index(me) if me in self.ranks else -1

    def included(self):
        """Whether this process is a member of the set."""
        self._registered()
        return _kolo.rank() in self.ranks

    def __eq__(self, other):
        return isinstance(other, ProcessSet) and (self.process_set_id, self.ranks) == (other.process_set_id,
                                                                                      other.ranks)

    def __hash__(self):
        return hash((self.process_set_id, tuple(self.ranks)))

    def __repr__(self):
        return "ProcessSet(process_set_id=%r, ranks=%r)" % (self.process_set_id, self.ranks)


class _GlobalProcessSet(ProcessSet):
    """Every rank of the job (id 0); its ranks are known once kolo is initialised."""

    def __init__(self):
        super().__init__([])
        self.process_set_id = 0

    @property
    def ranks(self):
        return list(range(_kolo.size())) if _kolo.is_initialized() else []

    @ranks.setter
    def ranks(self, value):
        pass  # fixed: every rank

    def rank(self):
        return _kolo.rank()

    def size(self):
        return _kolo.size()

    def included(self):
        return True


global_process_set = _GlobalProcessSet()


def add_process_set(process_set):
    """Registers `process_set` (a ProcessSet or a list of ranks) on every rank and returns
    the registered ProcessSet. Collective: every rank calls it with the same ranks."""
    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    if ps.process_set_id is not None:
        raise ValueError("kolo.torch.add_process_set: %r is registered already" % (ps,))
    ps.process_set_id, ps.ranks = _kolo.add_process_set(ps.ranks)
    return ps


def remove_process_set(process_set):
    """Unregisters `process_set` on every rank (collective). Returns False for a set that is
    not registered (or the global set) without calling the ranks; raises KoloError on every
    rank if any rank still has a collective on it in flight."""
    if process_set.process_set_id in (None, 0):
        return False
    _kolo.remove_process_set(process_set.process_set_id)
    process_set.process_set_id = None
    return True


def _set_id(process_set):
    """The id kolo knows `process_set` by (None: the global set, 0)."""
    if process_set is None:
        return 0
    if not isinstance(process_set, ProcessSet):
        raise TypeError("kolo.torch: process_set must be a ProcessSet, got %s" % type(process_set).__name__)
    process_set._registered()
    return process_set.process_set_id


def _rank_in(process_set):
    """This process's rank within `process_set` (None: the job)."""
    return _kolo.rank() if process_set is None else process_set.rank()
