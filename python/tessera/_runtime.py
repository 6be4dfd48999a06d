# SPDX-License-Identifier: Apache-2.0
"""Process-group state: rank, world size and the runtime (DGL's ``dgl.distributed.initialize``).

``initialize()`` reads the job from the environment that ``tessera launch`` (or torchrun, srun,
mpirun) sets: RANK / WORLD_SIZE, MASTER_ADDR / MASTER_PORT and TESSERA_JOB_TOKEN. It joins the
rendezvous and starts this rank's runtime: the transport (UCX over shared memory or tcp; local
for a world of one) and the server thread that answers the other ranks' reads, writes and
sampling requests. Every rank trains and serves, as in DGL with one server per trainer.

A world of one process is standalone mode: the same script, no launcher, no code change.
"""
from __future__ import annotations

import atexit
import os
import sys

from . import _C

_state = {"initialized": False, "rank": 0, "world_size": 1, "runtime": None}


def _env_world_size() -> int:
    for var in ("WORLD_SIZE", "TESSERA_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"):
        v = os.environ.get(var)
        if v:
            try:
                return int(v)
            except ValueError:
                raise ValueError(f"{var}={v!r} is not an integer world size") from None
    return 1


# dgl.distributed.initialize's keyword arguments (DGL 1.x and 2.x): accepted, without effect.
_DGL_INITIALIZE_KWARGS = frozenset({"max_queue_size", "net_type", "num_worker_threads",
                                    "use_graphbolt"})


def initialize(ip_config: str | None = None, num_servers: int = 1, num_workers: int = 0,
               backend: str = "", **kwargs) -> None:
    """Joins the job and starts this rank's runtime (DGL: ``dgl.distributed.initialize``).

    Collective: every rank of the job calls it. ``backend`` picks the transport ("ucx",
    "local"; default: TESSERA_TRANSPORT, else local for one process and ucx otherwise); "ucx"
    works in a process no launcher started too, as a world of one.
    ``ip_config``, ``num_servers`` and ``num_workers`` are accepted for DGL compatibility: each
    rank serves its own partition and samples in C++ threads, as are DGL's keyword arguments
    ``max_queue_size``, ``net_type``, ``num_worker_threads`` and ``use_graphbolt``; any other
    keyword is a TypeError. Calling it twice is a no-op.
    """
    unknown = sorted(set(kwargs) - _DGL_INITIALIZE_KWARGS)
    if unknown:
        raise TypeError(f"initialize() got an unexpected keyword argument {unknown[0]!r} (DGL's "
                        f"are accepted: {', '.join(sorted(_DGL_INITIALIZE_KWARGS))})")
    if _state["initialized"]:
        return
    world = _env_world_size()
    restore = _torchrun_store_port() if world > 1 and _under_torchrun_agent_store() else None
    try:
        rt = _C.Runtime.create(backend) if (world > 1 or backend) else _C.Runtime.create("local")
    except OSError as e:
        if _torch_process_group_initialized():
            raise OSError(f"{e}: torch.distributed.init_process_group() ran before "
                          "tessera.initialize(), and torch's store took MASTER_PORT; call "
                          "tessera.initialize() first (it hands torch a port of its own)") from e
        raise
    finally:
        if restore is not None:
            restore()
        # Rank 0's store now listens on the port reserved for it by the last exit_client().
        _close(_state.pop("next_rendezvous_reservation", None))
    _state.update(initialized=True, rank=rt.rank, world_size=rt.world_size, runtime=rt)
    atexit.register(_exit_at_interpreter_end)
    if rt.world_size > 1:
        _install_fail_fast()
    _export_torch_env(rt)


def _torch_process_group_initialized() -> bool:
    td = sys.modules.get("torch.distributed")
    try:
        return td is not None and td.is_available() and td.is_initialized()
    except Exception:  # noqa: BLE001 - only a hint for an error being raised
        return False


def _under_torchrun_agent_store() -> bool:
    """torchrun's agent hosts a TCPStore on MASTER_ADDR:MASTER_PORT for its workers."""
    env = os.environ
    return bool(env.get("TORCHELASTIC_RUN_ID")) and \
        env.get("TORCHELASTIC_USE_AGENT_STORE") == "True" and "MASTER_PORT" in env


def _torchrun_store_port():
    """Under torchrun, the port of Tessera's rendezvous store, agreed through torchrun's.

    torchrun's agent already listens on MASTER_PORT (the store its workers' init_process_group
    joins), so rank 0's rendezvous store cannot bind it. Rank 0 reserves a free port
    (SO_REUSEADDR, bound, not listening: the store binds it beside the reservation) and
    publishes it in the agent's store; every rank reads it there and joins Tessera's store on
    it. MASTER_PORT is set to it while the runtime starts; the returned function puts
    torchrun's back (torch.distributed then joins the agent's store, as under torchrun alone)
    and releases the reservation. MASTER_ADDR is left as torchrun set it: across nodes it must
    be rank 0's host (torchrun's static rendezvous, --master-addr of node 0)."""
    import datetime
    import socket

    from torch.distributed import TCPStore

    env = os.environ
    try:  # the runtime refuses a bad value by name below; inf (no deadline) fits a timedelta
        seconds = min(float(env.get("TESSERA_RENDEZVOUS_TIMEOUT") or 60), 1e8)
    except ValueError:
        seconds = 60.0
    seconds = seconds if seconds > 0 else 60.0
    generation = _state.get("torchrun_generation", 0)
    _state["torchrun_generation"] = generation + 1
    key = (f"tessera/rendezvous_port/{env.get('TORCHELASTIC_RESTART_COUNT', '0')}/"
           f"{generation}")
    store = TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), is_master=False,
                     timeout=datetime.timedelta(seconds=seconds))
    reservation = None
    if int(env.get("RANK", "0")) == 0:
        reservation = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            reservation.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            reservation.bind(("", 0))
            port = str(reservation.getsockname()[1])
            store.set(key, port)
        except BaseException:
            reservation.close()
            raise
    else:
        try:
            port = store.get(key).decode()
        except RuntimeError as e:  # torch's DistStoreError: "wait timeout after ...ms"
            raise RuntimeError(
                f"rank {env.get('RANK')} timed out after {seconds:g} s waiting for rank 0 to "
                f"publish the port of Tessera's rendezvous store (key '{key}' in torchrun's "
                f"store at {env['MASTER_ADDR']}:{env['MASTER_PORT']}); rank 0 did not call "
                "tessera.initialize() in that time (TESSERA_RENDEZVOUS_TIMEOUT sets it)") from e
    saved = env["MASTER_PORT"]
    env["MASTER_PORT"] = port

    def restore() -> None:
        env["MASTER_PORT"] = saved
        if reservation is not None:
            reservation.close()

    return restore


def _reserve_port() -> int:
    """A free TCP port, reserved for torch.distributed's store until the runtime ends.

    The socket stays bound to it (SO_REUSEADDR, never listening) until ``exit_client()``:
    Linux hands a port that a bound socket holds to no bind() to port 0 and to no connect() of
    any process (both draw from the same range), so the port cannot be taken in the seconds
    before ``init_process_group`` binds it, while torch's TCPStore (libuv and classic, both set
    SO_REUSEADDR) can still bind it and listen. A port that was merely free a moment ago could
    be taken meanwhile, and rank 0's store would then fail to start."""
    s, port = _bind_free_port()
    _release_port_reservation()
    _state["port_reservation"] = s
    return port


def _bind_free_port():
    """(socket, port): a socket bound to a free TCP port with SO_REUSEADDR, not listening (see
    _reserve_port)."""
    import socket

    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("", 0))
        return s, int(s.getsockname()[1])
    except BaseException:
        s.close()
        raise


def _close(s) -> None:
    if s is not None:
        s.close()


def _release_port_reservation() -> None:
    _close(_state.pop("port_reservation", None))


def _export_torch_env(rt: "_C.Runtime") -> None:
    """Makes ``torch.distributed.init_process_group(backend)`` (``env://``) join the same job
    after ``initialize()``, as DGL's scripts do right after ``dgl.distributed.initialize``.

    Rank 0's rendezvous store keeps MASTER_PORT bound for the whole job, so torch's store could
    not bind it: rank 0 picks a free port (reserved until the runtime ends: _reserve_port),
    every rank sets MASTER_PORT to it (the store's port stays in TESSERA_RENDEZVOUS_PORT) and
    sets RANK / WORLD_SIZE / MASTER_ADDR when they are unset (srun, mpirun). A world of one gets
    RANK=0, WORLD_SIZE=1, MASTER_ADDR=127.0.0.1 and a free (reserved) MASTER_PORT where unset
    (no launcher: standalone mode). Under torchrun (TORCHELASTIC_RUN_ID) torch's variables are
    its own and are left alone."""
    env = os.environ
    if env.get("TORCHELASTIC_RUN_ID"):
        return
    env.setdefault("RANK", str(rt.rank))
    env.setdefault("WORLD_SIZE", str(rt.world_size))
    if rt.world_size == 1:
        env.setdefault("MASTER_ADDR", "127.0.0.1")
        if "MASTER_PORT" not in env:
            env["MASTER_PORT"] = str(_reserve_port())
        return
    import socket

    # Rank 0 also reserves the port of the rendezvous after the next exit_client(), kept until
    # that initialize() has started: the ranks that leave the barrier of exit_client() first
    # may join again while rank 0's old store still stops on the old port, and connected there
    # they failed ("failed to store 'ucx/addr/1'") and rank 0 timed out waiting for them.
    mine = ""
    if rt.rank == 0:
        _close(_state.pop("next_rendezvous_reservation", None))
        s, next_port = _bind_free_port()
        _state["next_rendezvous_reservation"] = s
        mine = f"{_reserve_port()} {next_port} {socket.gethostname()}"
    port, next_port, host = rt.all_gather_bytes(mine.encode())[0].decode().split(" ", 2)
    _state["next_rendezvous_port"] = next_port
    if "MASTER_PORT" in env:
        env["TESSERA_RENDEZVOUS_PORT"] = env["MASTER_PORT"]
    env["MASTER_PORT"] = port
    env.setdefault("MASTER_ADDR", host)


def _install_fail_fast() -> None:
    """An uncaught exception on one rank ends that process at once (exit code 1) after the
    traceback is printed, instead of running the clean teardown, whose final barrier would wait
    for ranks that are still training. The launcher then stops the other ranks, and any rank
    still waiting on this one fails naming it."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        try:
            previous(kind, value, tb)
        finally:
            for f in (sys.stdout, sys.stderr):
                try:
                    f.flush()
                except Exception:
                    pass
            os._exit(1)

    sys.excepthook = hook
    # sys.exit(status) with a failing status (parser.error() among them) raises SystemExit,
    # which never reaches the hook: record it, so the exit does not wait in a barrier of the
    # other ranks (see _exit_at_interpreter_end).
    # Only the main thread's: sys.exit elsewhere ends a thread, not the process. A SystemExit
    # the script catches and goes on from is forgotten at its next use of the runtime.
    real_exit = sys.exit
    import threading

    def exit(status=None):
        if threading.current_thread() is threading.main_thread():
            _state["exit_status"] = status
        real_exit(status)

    exit.__doc__ = real_exit.__doc__
    sys.exit = exit


def _exit_at_interpreter_end() -> None:
    """exit_client() at the end of the interpreter, unless the process is leaving through
    sys.exit with a failing status: then the other ranks may be anywhere in their work, and a
    barrier here would be matched with one of their collectives (or wait until it times out)
    instead of letting the launcher name this rank and its exit code at once. When that
    exit_client() fails (a rank left without it), the error goes to stderr and the process
    exits with code 1, so the launcher reports the job as failed."""
    status = _state.get("exit_status")
    # Python's exit code of the status: an int modulo 256 (-1 is 255), None 0, anything else 1
    # (its text was printed).
    code = (status & 0xFF if isinstance(status, int) else 0 if status is None else 1)
    if code != 0 and _state["world_size"] > 1:
        _flush_and_exit(code)
    try:
        exit_client()
    except Exception as e:  # noqa: BLE001 - any failure of the final barrier ends the job
        # Python only prints what an atexit callback raises ("Exception ignored in atexit
        # callback") and exits 0, so a rank that vanished without exit_client (os._exit(0))
        # would leave a job the launcher reports as a success.
        print(f"tessera: exit_client() at interpreter exit failed: {type(e).__name__}: {e}",
              file=sys.stderr)
        _flush_and_exit(1)


def _flush_and_exit(code: int) -> None:
    """Ends the process with ``code`` at once (no further atexit callbacks, no barrier) after
    flushing what it printed."""
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass
    os._exit(code)


def is_initialized() -> bool:
    return bool(_state["initialized"])


def runtime() -> "_C.Runtime":
    """This rank's runtime (initializes standalone mode when nothing was initialized)."""
    if not _state["initialized"]:
        initialize()
    _state.pop("exit_status", None)  # the script goes on: a SystemExit it caught is not the end
    return _state["runtime"]


def get_rank() -> int:
    """This process's rank (0 in standalone mode)."""
    return int(_state["rank"])


def get_world_size() -> int:
    """Number of trainer processes (1 in standalone mode)."""
    return int(_state["world_size"])


def job_world_size() -> int:
    """The world size for a collective: before ``initialize()``, when the environment describes
    a job of several ranks (RANK / WORLD_SIZE from a launcher), joins it first, as ``runtime()``
    does; a collective that went by get_world_size() (1 until then) would return its input
    unreduced on every rank instead. Standalone (a world of one) initializes nothing."""
    if not _state["initialized"] and _env_world_size() > 1:
        initialize()
    return get_world_size()


def is_distributed() -> bool:
    return get_world_size() > 1


def barrier(what: str = "barrier") -> None:
    """Returns once every rank has called it. ``what`` names the call in the ValueError every
    rank raises when the ranks called different collectives (e.g. one rank a barrier, another
    an all_reduce). Before ``initialize()`` in a job of several ranks it joins the job first
    (job_world_size)."""
    job_world_size()
    if _state["initialized"]:
        _state.pop("exit_status", None)  # see runtime()
        _state["runtime"].barrier(what)


def exit_client() -> None:
    """Leaves the job (DGL: ``dgl.distributed.exit_client``): waits for every rank, so no rank
    stops serving while another still reads from it. Idempotent; also runs at exit."""
    rt = _state["runtime"]
    if rt is None:
        return
    _state.update(initialized=False, runtime=None)
    _release_port_reservation()
    rt.barrier("exit_client")
    # A later initialize() joins through the port rank 0 reserved for it (_export_torch_env),
    # not the last store's.
    next_port = _state.pop("next_rendezvous_port", None)
    if next_port is not None:
        os.environ.pop("TESSERA_RENDEZVOUS_PORT", None)
        os.environ["MASTER_PORT"] = next_port
    elif "TESSERA_RENDEZVOUS_PORT" in os.environ:
        os.environ["MASTER_PORT"] = os.environ.pop("TESSERA_RENDEZVOUS_PORT")
