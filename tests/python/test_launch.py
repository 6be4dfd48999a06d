# SPDX-License-Identifier: Apache-2.0
"""``python -m tessera launch``: the options of the C++ ``tessera launch`` (--token-file, --grace,
a required --nproc-per-node), and one clear error when the command is not after ``--``."""
import os
import re
import secrets
import signal
import subprocess
import sys
import time

import pytest

import tessera


def launch(*args, cwd):
    # A scratch folder as the working directory: the installed package, not a source folder.
    return subprocess.run([sys.executable, "-m", "tessera", "launch", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


def describe(r):
    return f"exit code {r.returncode}\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-4000:]}"


def token_file(tmp_path, token, mode=0o600):
    path = tmp_path / "token"
    path.write_text(token + "\n")
    path.chmod(mode)
    return path


def test_help_describes_every_option_and_the_command(tmp_path):
    r = launch("--help", cwd=tmp_path)
    assert r.returncode == 0, describe(r)
    for option in ("--nproc-per-node", "--nnodes", "--node-rank", "--master-addr",
                   "--master-port", "--token-file", "--grace", "--no-prefix", "-- CMD"):
        assert option in r.stdout, describe(r)
    assert "Seconds between SIGTERM and SIGKILL" in r.stdout, describe(r)


def test_nproc_per_node_is_required(tmp_path):
    r = launch("--", "true", cwd=tmp_path)
    assert r.returncode == 2, describe(r)
    assert "--nproc-per-node" in r.stderr, describe(r)


def test_a_command_without_double_dash_is_one_clear_error(tmp_path):
    r = launch("--nproc-per-node", 2, "python3", "-c", "print(1)", cwd=tmp_path)
    assert r.returncode == 2, describe(r)
    assert "put the command the ranks run after `--`" in r.stderr, describe(r)
    assert "-- python3 -c 'print(1)'" in r.stderr, describe(r)
    assert "unrecognized arguments" not in r.stderr, describe(r)
    assert r.stdout == "", describe(r)


def test_token_file_gives_every_rank_its_token(tmp_path):
    # The error for several nodes without a token names --token-file: the option exists.
    r = launch("--nproc-per-node", 1, "--nnodes", 2, "--", "true", cwd=tmp_path)
    assert r.returncode == 2, describe(r)
    assert "--token-file" in r.stderr, describe(r)
    token = secrets.token_hex(32)
    r = launch("--nproc-per-node", 2, "--nnodes", 2, "--token-file", token_file(tmp_path, token),
               "--", "sh", "-c", 'echo "token $TESSERA_JOB_TOKEN"', cwd=tmp_path)
    assert r.returncode == 0, describe(r)
    assert sorted(r.stdout.splitlines()) == [f"[rank {k}] token {token}" for k in (0, 1)], \
        describe(r)


def test_token_file_others_can_read_is_refused_by_its_option_name(tmp_path):
    path = token_file(tmp_path, secrets.token_hex(32), mode=0o644)
    r = launch("--nproc-per-node", 1, "--token-file", path, "--", "true", cwd=tmp_path)
    assert r.returncode == 2, describe(r)
    assert f"--token-file {path}: mode 0644 lets other users read it" in r.stderr, describe(r)


def test_launch_function_leaves_the_environment_as_it_was(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_JOB_TOKEN", "x" * 32)
    monkeypatch.delenv("TESSERA_JOB_TOKEN_FILE", raising=False)
    out = tmp_path / "seen"
    token = secrets.token_hex(32)
    rc = tessera.launch(["sh", "-c", f'echo "$TESSERA_JOB_TOKEN" > {out}'], nproc_per_node=1,
                        token_file=token_file(tmp_path, token))
    assert rc == 0
    assert out.read_text().strip() == token
    assert os.environ["TESSERA_JOB_TOKEN"] == "x" * 32
    assert "TESSERA_JOB_TOKEN_FILE" not in os.environ


def test_ranks_start_with_sigpipe_and_sigxfsz_at_their_default(tmp_path):
    # Python ignores both, and an ignored signal stays ignored across exec: the ranks of
    # `python -m tessera launch` started with them ignored (SigIgn 0x1001000), so a rank's
    # `yes | head -1` printed "yes: standard output: Broken pipe"; torchrun's ranks and the C++
    # launcher's start with neither ignored.
    r = launch("--nproc-per-node", 1, "--", "sh", "-c",
               "grep SigIgn /proc/self/status; yes | head -1", cwd=tmp_path)
    assert r.returncode == 0, describe(r)
    m = re.search(r"\[rank 0\] SigIgn:\s+([0-9a-f]+)\n", r.stdout)
    assert m, describe(r)
    ignored = int(m.group(1), 16)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        assert not ignored & (1 << (sig - 1)), f"{sig.name} ignored: {describe(r)}"
    assert "Broken pipe" not in r.stderr, describe(r)


def test_launch_function_ignores_sigpipe_again_after_the_job(tmp_path):
    assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN  # Python's default
    assert tessera.launch(["true"], nproc_per_node=1) == 0
    assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN
    assert signal.getsignal(signal.SIGXFSZ) == signal.SIG_IGN


def test_what_a_stopped_python_rank_printed_is_shown(tmp_path, monkeypatch):
    # Rank 0 prints a line and works on; rank 1 fails and the launcher stops rank 0. Its stdout
    # is a pipe, so Python buffered the line, and SIGTERM ended it unflushed: the line was lost.
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    script = tmp_path / "stopped.py"
    script.write_text(
        "import os, sys, time\n"
        "rank = int(os.environ['RANK'])\n"
        "print(f'rank {rank} epoch 1 loss 0.5')\n"
        "if rank == 1:\n"
        "    time.sleep(1)\n"
        "    sys.exit(3)\n"
        "time.sleep(60)\n")
    r = launch("--nproc-per-node", 2, "--", sys.executable, script, cwd=tmp_path)
    assert r.returncode == 3, describe(r)
    assert "[rank 0] rank 0 epoch 1 loss 0.5\n" in r.stdout, describe(r)
    assert "[rank 1] rank 1 epoch 1 loss 0.5\n" in r.stdout, describe(r)
    assert "PYTHONUNBUFFERED" not in os.environ
    assert tessera.launch(["true"], nproc_per_node=1) == 0
    assert "PYTHONUNBUFFERED" not in os.environ, "tessera.launch() left PYTHONUNBUFFERED set"


def test_a_rank_reads_the_terminal_the_launcher_runs_on(tmp_path):
    """input() (or breakpoint()) in a rank of a launcher that runs in the foreground of a
    terminal: the rank reads the line. In a process group of the launcher's session the rank
    was a background job of the terminal, stopped by SIGTTIN for ever (state T)."""
    import pty
    import select

    pid, fd = pty.fork()  # the child leads a session whose controlling terminal is the pty
    if pid == 0:
        try:
            os.execv(sys.executable, [sys.executable, "-m", "tessera", "launch",
                                      "--nproc-per-node", "1", "--", sys.executable, "-c",
                                      "print('read', repr(input()))"])
        finally:
            os._exit(127)
    out, deadline = b"", time.monotonic() + 60
    try:
        os.write(fd, b"hello\n")
        while b"read 'hello'" not in out and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.5)[0]:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:  # EIO: the launcher ended and the pty closed
                    break
                if not chunk:
                    break
                out += chunk
    finally:
        if os.waitpid(pid, os.WNOHANG) == (0, 0):
            time.sleep(1)
        if os.waitpid(pid, os.WNOHANG) == (0, 0):
            os.kill(pid, signal.SIGKILL)  # the rank dies with it (PR_SET_PDEATHSIG)
            os.waitpid(pid, 0)
        os.close(fd)
    assert b"read 'hello'" in out, out.decode(errors="replace")


def test_ranks_get_torchruns_names_of_their_numbers(tmp_path):
    r = launch("--nproc-per-node", 2, "--", sys.executable, "-c",
               "import os; print(*(os.environ.get(k) for k in ('RANK', 'GROUP_RANK', "
               "'GROUP_WORLD_SIZE', 'ROLE_RANK', 'ROLE_WORLD_SIZE', 'ROLE_NAME')))",
               cwd=tmp_path)
    assert r.returncode == 0, describe(r)
    assert "[rank 0] 0 0 1 0 2 default\n" in r.stdout, describe(r)
    assert "[rank 1] 1 0 1 1 2 default\n" in r.stdout, describe(r)


def test_a_ucx_runtime_in_a_process_no_launcher_started(tmp_path):
    """initialize(backend="ucx") in a plain process: a world of one over UCX, with a fresh job
    token and a free store port (it failed with "store: empty job token")."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "MASTER_PORT", "MASTER_ADDR", "TESSERA_JOB_TOKEN",
                        "TESSERA_JOB_TOKEN_FILE", "TESSERA_TRANSPORT")}
    code = ("import numpy as np, tessera, tessera.distributed as dist\n"
            "tessera.initialize(backend='ucx')\n"
            "rt = tessera._runtime.runtime()\n"
            "print(rt.backend, rt.world_size, dist.all_reduce(np.ones(2, np.float32)).tolist())\n"
            "tessera.exit_client()\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 0, describe(r)
    assert r.stdout.strip() == "ucx 1 [1.0, 1.0]", describe(r)


def test_launch_function_refuses_a_command_string():
    # "echo hello" was run as ["e", "c", "h", ...]: every rank failed with "cannot run 'e'".
    with pytest.raises(TypeError, match=r"list of arguments, not a string: 'echo hello' "
                                        r"\(e\.g\. shlex\.split"):
        tessera.launch("echo hello", nproc_per_node=1)


def test_grace_bounds_the_wait_for_a_rank_that_ignores_sigterm(tmp_path):
    # Rank 0 fails; rank 1 ignores SIGTERM and is killed --grace seconds later (default 5).
    script = 'if [ "$RANK" = 0 ]; then sleep 0.5; exit 3; fi; trap "" TERM; sleep 60'
    t0 = time.monotonic()
    r = launch("--nproc-per-node", 2, "--grace", 0.2, "--", "sh", "-c", script, cwd=tmp_path)
    seconds = time.monotonic() - t0
    assert r.returncode == 3, describe(r)
    assert "sending SIGKILL" in r.stderr, describe(r)
    assert seconds < 4, f"{seconds:.1f} s\n{describe(r)}"


def test_sys_exit_on_one_rank_is_named_with_its_code_at_once(tmp_path, monkeypatch):
    # Rank 1 leaves through sys.exit(3) while rank 0 still works. Its exit ran the teardown's
    # barrier, which rank 0's next all_reduce then matched: the job failed naming rank 0 (code
    # 1), or only when an operation timed out.
    script = tmp_path / "exits.py"
    script.write_text(
        "import sys, time\n"
        "import numpy as np\n"
        "import tessera.distributed as dist\n"
        "dist.initialize()\n"
        "if dist.get_rank() == 1:\n"
        "    sys.exit(3)\n"
        "time.sleep(2)\n"
        "dist.all_reduce(np.ones(4, dtype=np.float32))\n"
        "dist.all_reduce(np.ones(4, dtype=np.float32))\n"
        "print('rank 0 went on', flush=True)\n")
    monkeypatch.setenv("TESSERA_OP_TIMEOUT", "60")
    t0 = time.monotonic()
    r = launch("--nproc_per_node", 2, "--", sys.executable, script, cwd=tmp_path)
    assert time.monotonic() - t0 < 30, describe(r)
    assert r.returncode == 3 and "rank 1 exited with code 3" in r.stderr, describe(r)
    assert "rank 0 went on" not in r.stdout, describe(r)


def test_a_caught_or_threaded_sys_exit_does_not_fail_the_job(tmp_path):
    # Only a SystemExit that ends the process ends the job with its code: one the script catches
    # (parser.error() in a try) and goes on from, or one in a thread, does not.
    script = tmp_path / "caught.py"
    script.write_text(
        "import sys, threading\n"
        "import numpy as np\n"
        "import tessera.distributed as dist\n"
        "dist.initialize()\n"
        "try:\n"
        "    sys.exit(2)\n"
        "except SystemExit:\n"
        "    pass\n"
        "t = threading.Thread(target=sys.exit, args=(1,))\n"
        "t.start(); t.join()\n"
        "dist.all_reduce(np.ones(4, dtype=np.float32))\n"
        "print('done', dist.get_rank(), flush=True)\n")
    r = launch("--nproc-per-node", 2, "--", sys.executable, script, cwd=tmp_path)
    assert r.returncode == 0, describe(r)
    assert "done 0" in r.stdout and "done 1" in r.stdout, describe(r)


BEFORE_INITIALIZE = """
import os, time
import numpy as np
import tessera.distributed as dist

rank = int(os.environ["RANK"])
t0 = time.monotonic()
if rank == 1:
    time.sleep(1.5)
dist.barrier()
waited = rank == 1 or time.monotonic() - t0 >= 1.0
x = dist.all_reduce(np.full(2, rank + 1.0))
print(f"rank={rank} waited={waited} sum={x.tolist()} gathered={dist.all_gather_object(rank)} "
      f"world={dist.get_world_size()}", flush=True)
"""


def test_collectives_before_initialize_join_the_job(tmp_path):
    # Without initialize(), get_world_size() is 1 until something joins the job, and barrier()
    # returned at once, all_reduce returned its input unreduced and all_gather_object [obj] on
    # every rank of a 2-rank job: silently no collective at all.
    script = tmp_path / "before_initialize.py"
    script.write_text(BEFORE_INITIALIZE)
    r = launch("--nproc-per-node", 2, "--", sys.executable, script, cwd=tmp_path)
    assert r.returncode == 0, describe(r)
    for rank in (0, 1):
        assert (f"[rank {rank}] rank={rank} waited=True sum=[3.0, 3.0] gathered=[0, 1] world=2"
                in r.stdout), describe(r)


TORCH_FIRST = """
import torch.distributed as tdist
import tessera

tdist.init_process_group("gloo")
tessera.initialize()
"""


def test_init_process_group_before_initialize_is_named(tmp_path):
    # The documented order is initialize() first. The other way round, torch's store holds
    # MASTER_PORT and the error was only "rank 0 could not host the rendezvous store on
    # 127.0.0.1:P ('127.0.0.1'): Address already in use".
    pytest.importorskip("torch")
    script = tmp_path / "torch_first.py"
    script.write_text(TORCH_FIRST)
    r = launch("--nproc-per-node", 2, "--", sys.executable, script, cwd=tmp_path)
    assert r.returncode == 1, describe(r)
    assert ("torch.distributed.init_process_group() ran before tessera.initialize(), and "
            "torch's store took MASTER_PORT; call tessera.initialize() first") in r.stderr, \
        describe(r)


REJOIN = """
import numpy as np
import tessera
import tessera.distributed as dist

for i in range(6):
    tessera.initialize()
    print(f"round {i} sum {dist.all_reduce(np.ones(2)).tolist()}", flush=True)
    tessera.exit_client()
"""


def test_initialize_again_after_exit_client(tmp_path, monkeypatch):
    # Rank 1 left exit_client()'s barrier and joined again while rank 0's old store still
    # stopped on the same port: connected there, rank 1 failed ("failed to store
    # 'ucx/addr/1'") and rank 0 timed out waiting for it, in about half of the 2-round jobs.
    monkeypatch.setenv("TESSERA_RENDEZVOUS_TIMEOUT", "10")
    script = tmp_path / "rejoin.py"
    script.write_text(REJOIN)
    r = launch("--nproc-per-node", 2, "--", sys.executable, script, cwd=tmp_path)
    assert r.returncode == 0, describe(r)
    for rank in (0, 1):
        for i in range(6):
            assert f"[rank {rank}] round {i} sum [2.0, 2.0]\n" in r.stdout, describe(r)


def test_under_torchrun_a_rank_zero_that_never_initializes_is_named(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "no_rank0.py"
    script.write_text("import os, time\n"
                      "import tessera\n"
                      "if os.environ['RANK'] == '0':\n"
                      "    time.sleep(6)\n"
                      "    raise SystemExit(0)\n"
                      "tessera.initialize()\n")
    env = dict(os.environ, TESSERA_JOB_TOKEN=secrets.token_hex(32),
               TESSERA_RENDEZVOUS_TIMEOUT="2")
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--nproc-per-node", "2", str(script)], capture_output=True, text=True,
                       cwd=tmp_path, env=env, timeout=120)
    assert r.returncode != 0, describe(r)
    assert re.search(r"rank 1 timed out after 2 s waiting for rank 0 to publish the port of "
                     r"Tessera's rendezvous store \(key 'tessera/rendezvous_port/0/0' in "
                     r"torchrun's store at [^)]+\); rank 0 did not call tessera.initialize\(\) "
                     r"in that time", r.stderr), describe(r)


STORE_SOCKET = """
import os, socket
import tessera.distributed as dist

def state(fd):
    try:
        s = socket.socket(fileno=fd)
    except OSError:
        return "closed"
    try:
        listening = s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
        return "{}:{}/{}".format(*s.getsockname(), "listening" if listening else "bound")
    finally:
        s.detach()

var = os.environ.get("TESSERA_STORE_SOCKET", "-")
fd = int(var.split(":")[0]) if var != "-" else -1
master = os.environ["MASTER_PORT"]
before = state(fd) if fd >= 0 else "none"
dist.initialize()
after = state(fd) if fd >= 0 else "none"
print(f"rank={dist.get_rank()} var={var} master={master} before={before} after={after}",
      flush=True)
dist.exit_client()
"""


def test_rank_zero_store_listens_on_the_socket_the_launcher_reserved(tmp_path):
    # The launcher binds the port it picks for the store and hands the socket to rank 0 alone,
    # whose store (initialize()) listens on it: the port is never free in between, for another
    # process's connect() or bind to port 0 to take. It used to be free once picked.
    script = tmp_path / "store_socket.py"
    script.write_text(STORE_SOCKET)
    r = launch("--nproc-per-node", 2, "--", sys.executable, script, cwd=tmp_path)
    assert r.returncode == 0, describe(r)
    m = re.search(r"\[rank 0\] rank=0 var=\d+:(\d+) master=(\d+) "
                  r"before=127\.0\.0\.1:(\d+)/bound after=127\.0\.0\.1:(\d+)/listening\n", r.stdout)
    assert m and len(set(m.groups())) == 1, describe(r)
    assert re.search(r"\[rank 1\] rank=1 var=- master=\d+ before=none after=none\n",
                     r.stdout), describe(r)


TORCHRUN = """
import os
import numpy as np
import torch
import torch.distributed as tdist
import tessera
import tessera.distributed as dist

port = os.environ["MASTER_PORT"]
tessera.initialize()
assert os.environ["MASTER_PORT"] == port, "torchrun's MASTER_PORT was not put back"
x = dist.all_reduce(np.full(3, tessera.get_rank() + 1.0))
tdist.init_process_group("gloo")
t = torch.full((2,), float(tdist.get_rank() + 1))
tdist.all_reduce(t)
print(f"rank={tessera.get_rank()} world={tessera.get_world_size()} tessera={x.tolist()} "
      f"torch={t.tolist()}", flush=True)
tdist.destroy_process_group()
tessera.exit_client()
"""


def test_initialize_under_torchrun_joins_beside_torchruns_store(tmp_path):
    # torchrun's agent listens on MASTER_PORT (its workers' store): rank 0's rendezvous store
    # could not bind it ("Address already in use") and no script ran under torchrun.
    pytest.importorskip("torch")  # torchrun is torch's
    script = tmp_path / "torchrun_job.py"
    script.write_text(TORCHRUN)
    env = dict(os.environ, TESSERA_JOB_TOKEN=secrets.token_hex(32))
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--nproc-per-node", "2", str(script)], capture_output=True, text=True,
                       cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 0, describe(r)
    for rank in (0, 1):
        assert f"rank={rank} world=2 tessera=[3.0, 3.0, 3.0] torch=[3.0, 3.0]" in r.stdout, \
            describe(r)
