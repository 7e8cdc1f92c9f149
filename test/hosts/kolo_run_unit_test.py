"""kolo-run without other hosts (label unit): how each flag turns into the mpirun command
(--dry-run), and every error that must come before any rank starts. The same flags across
simulated hosts are in kolo_run_hosts_test.sh (label hosts).

Run by CTest: /usr/bin/python3 -m pytest kolo_run_unit_test.py with KOLOTEST_KOLO_RUN=<built kolo-run>.
"""
import os
import shlex
import socket
import stat
import subprocess

import pytest

KOLO_RUN = os.environ["KOLOTEST_KOLO_RUN"]


def run(*args, env=None, cwd=None):
    e = dict(os.environ)
    e.pop("SLURM_JOB_NODELIST", None)
    e.update(env or {})
    return subprocess.run([KOLO_RUN, *args], capture_output=True, text=True, env=e, cwd=cwd, timeout=60)


def dry(*args, **kw):
    r = run("--dry-run", *args, **kw)
    assert r.returncode == 0, r.stderr
    return shlex.split(r.stdout)


def test_hosts_slots_and_np():
    cmd = dry("-np", "3", "-H", "a:2,b:2", "prog", "x")
    assert cmd[cmd.index("-np") + 1] == "3"
    assert cmd[cmd.index("-H") + 1] == "a:2,b:2"
    assert cmd[-2:] == ["prog", "x"]
    # -np defaults to every slot; a host without :slots has one.
    cmd = dry("-H", "a,b:3", "prog")
    assert cmd[cmd.index("-np") + 1] == "4"
    assert cmd[cmd.index("-H") + 1] == "a:1,b:3"


def test_program_arguments_are_left_alone():
    cmd = dry("-H", "a:2", "prog", "-np", "7", "--verbose")
    assert cmd[-4:] == ["prog", "-np", "7", "--verbose"]
    assert "KOLO_VERBOSE=1" not in cmd


def test_hostfile_forms(tmp_path):
    f = tmp_path / "hosts"
    f.write_text("# cluster\na slots=2\nb:3   # comment\n\nc\n")
    cmd = dry("--hostfile", str(f), "prog")
    assert cmd[cmd.index("-H") + 1] == "a:2,b:3,c:1"
    assert cmd[cmd.index("-np") + 1] == "6"


@pytest.mark.parametrize("content,needle", [
    ("a slots=x\n", "line 1"),
    ("a:0\n", "expected a positive whole number"),
    ("a b c\n", "expected 'host', 'host:N' or 'host slots=N'"),
    ("# nothing\n", "names no host"),
])
def test_hostfile_errors(tmp_path, content, needle):
    f = tmp_path / "hosts"
    f.write_text(content)
    r = run("--dry-run", "--hostfile", str(f), "prog")
    assert r.returncode == 2
    assert needle in r.stderr and "kolo-run: error:" in r.stderr


def test_missing_hostfile():
    r = run("--hostfile", "/nonexistent/hosts", "prog")
    assert r.returncode == 2 and "--hostfile /nonexistent/hosts" in r.stderr


@pytest.mark.parametrize("args,needle", [
    (["-np", "5", "-H", "a:2,b:2", "prog"], "-np 5 is more than the 4 slots of a:2,b:2"),
    (["-H", "a:x", "prog"], "host 'a' has slot count 'x'"),
    (["-H", "a:2", "--hostfile", "f", "prog"], "-H and --hostfile both given"),
    (["-H", "a:2"], "no program given"),
    (["--launcher", "ssh", "prog"], "--launcher ssh needs hosts"),
    (["--launcher", "slurm", "prog"], "not inside a Slurm allocation (SLURM_JOB_NODELIST is unset)"),
    (["--launcher", "local", "-H", "elsewhere.invalid:2", "prog"], "this host only, but -H/--hostfile names"),
    (["--min-shm", "lots", "-H", "a", "prog"], "--min-shm 'lots'"),
    (["--env", "NOVALUE", "-H", "a", "prog"], "--env 'NOVALUE': expected NAME=VALUE"),
    (["-np", "0", "-H", "a:2", "prog"], "-np 0: expected at least 1 rank"),
    (["--launcher", "pbs", "prog"], "argument --launcher: invalid choice: 'pbs'"),
    (["--launcher", "mpi", "prog"], "--launcher mpi needs hosts"),
])
def test_usage_errors(args, needle):
    r = run("--dry-run", *args)
    assert r.returncode == 2, r.stdout
    assert needle in r.stderr


def test_oversubscribe_allows_more_ranks():
    cmd = dry("-np", "5", "-H", "a:2,b:2", "--oversubscribe", "prog")
    assert "--oversubscribe" in cmd


def test_network_interface_sets_open_mpi_kolo_and_nccl():
    cmd = dry("-H", "a:2", "--network-interface", "eth1", "prog")
    line = " ".join(cmd)
    assert "--mca btl_tcp_if_include eth1" in line
    assert "--mca oob_tcp_if_include eth1" in line
    assert "KOLO_NETWORK_INTERFACE=eth1" in cmd
    assert "-x KOLO_NETWORK_INTERFACE" in line and "-x NCCL_SOCKET_IFNAME" in line


def test_verbose_and_env_forwarding():
    cmd = dry("-H", "a:2", "--verbose", "--env", "FOO=1", "prog",
              env={"KOLO_FUSION_THRESHOLD": "1M", "KOLO_RUN_RSH": "ssh"})
    line = " ".join(cmd)
    assert "KOLO_VERBOSE=1" in cmd
    for name in ("KOLO_VERBOSE", "FOO", "KOLO_FUSION_THRESHOLD", "PATH"):
        assert "-x " + name in line
    assert "-x KOLO_RUN_RSH" not in line  # kolo-run's own setting, not kolo's


def test_launcher_ssh_uses_the_remote_shell():
    cmd = dry("--launcher", "ssh", "--rsh", "/opt/my-ssh -p 2222", "-H", "a:2", "prog")
    line = " ".join(cmd)
    assert "--mca plm rsh" in line
    assert cmd[cmd.index("plm_rsh_agent") + 1] == "/opt/my-ssh -p 2222"


def test_launcher_local():
    cmd = dry("--launcher", "local", "-np", "3", "prog")
    assert "-H" not in cmd and cmd[cmd.index("-np") + 1] == "3"
    # Without hosts and outside Slurm, local is the default.
    assert "-H" not in dry("-np", "2", "prog")


def test_sync_dst_dir_sets_the_ranks_directory():
    cmd = dry("-H", "a:1", "--sync-dst-dir", "/scratch/job", "prog")
    assert cmd[cmd.index("--wdir") + 1] == "/scratch/job"


def test_sync_dst_dir_failure_names_the_host_and_starts_nothing(tmp_path):
    marker = tmp_path / "started"
    r = run("--launcher", "local", "--sync-dst-dir", "/proc/kolo-no-such-dir", "touch", str(marker), cwd=str(tmp_path))
    assert r.returncode == 1
    assert "kolo-run: error: --sync-dst-dir: cannot create /proc/kolo-no-such-dir on " in r.stderr
    assert "Traceback" not in r.stderr
    assert not marker.exists()



def test_sync_dst_dir_without_rsync_says_so(tmp_path):
    # A PATH with mpirun but no rsync: the copy is refused with the package to install.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mpirun").symlink_to("/usr/bin/mpirun")
    marker = tmp_path / "started"
    r = run("--launcher", "local", "--sync-dst-dir", str(tmp_path / "dst"), "touch", str(marker),
            cwd=str(tmp_path), env={"PATH": str(bin_dir)})
    assert r.returncode == 1, r.stderr
    assert "kolo-run: error: --sync-dst-dir needs rsync on this host, and it is not installed" in r.stderr
    assert "Traceback" not in r.stderr
    assert not marker.exists()

def test_missing_mpirun_is_named():
    r = run("--launcher", "local", "--mpirun", "no-such-mpirun-9", "prog")
    assert r.returncode == 1
    assert "no-such-mpirun-9 not found on PATH" in r.stderr


def fake_scontrol(tmp_path):
    f = tmp_path / "scontrol"
    f.write_text("#!/bin/sh\n[ \"$1 $2 $3\" = 'show hostnames node[1-3]' ] || exit 1\n"
                 "printf 'node1\\nnode2\\nnode3\\n'\n")
    f.chmod(f.stat().st_mode | stat.S_IEXEC)
    return str(tmp_path) + ":" + os.environ["PATH"]


def test_launcher_slurm_takes_hosts_from_the_allocation(tmp_path):
    env = {"PATH": fake_scontrol(tmp_path), "SLURM_JOB_NODELIST": "node[1-3]", "SLURM_TASKS_PER_NODE": "2(x2),1"}
    cmd = dry("--launcher", "slurm", "prog", env=env)
    assert cmd[cmd.index("-H") + 1] == "node1:2,node2:2,node3:1"
    assert cmd[cmd.index("-np") + 1] == "5"
    # Inside an allocation and without -H, slurm is the default launcher.
    assert dry("prog", env=env)[dry("prog", env=env).index("-H") + 1] == "node1:2,node2:2,node3:1"
    r = run("--dry-run", "--launcher", "slurm", "-H", "a:1", "prog", env=env)
    assert r.returncode == 2 and "takes its hosts from Slurm" in r.stderr


def test_slurm_task_counts_must_match_nodes(tmp_path):
    env = {"PATH": fake_scontrol(tmp_path), "SLURM_JOB_NODELIST": "node[1-3]", "SLURM_TASKS_PER_NODE": "2(x2)"}
    r = run("--dry-run", "--launcher", "slurm", "prog", env=env)
    assert r.returncode == 2 and "gives 2 counts for 3 nodes" in r.stderr


def test_bad_host_name_fails_before_any_rank(tmp_path):
    marker = tmp_path / "started"
    r = run("-H", "no-such-host.invalid:2", "touch", str(marker))
    assert r.returncode == 1
    assert "host no-such-host.invalid: name does not resolve" in r.stderr
    assert "no rank was started" in r.stderr
    assert not marker.exists()


def test_check_on_this_host():
    r = run("--check", "-H", "localhost:2")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["host", "slots", "via"]
    assert lines[1].split()[:4] == ["localhost", "2", "local", socket.gethostname()]
    assert lines[1].rstrip().endswith("OK")


def test_check_reports_missing_interface_and_small_shm():
    r = run("--check", "-H", "localhost:1", "--network-interface", "nosuchif9", "--min-shm", "1024G")
    assert r.returncode == 1
    assert "host localhost: " in r.stderr
    assert "no interface nosuchif9 (it has: " in r.stderr
    assert "less than --min-shm 1 TiB" in r.stderr


def test_local_launch_runs_the_program():
    r = run("--launcher", "local", "-np", "2", "--oversubscribe", "sh", "-c", "echo rank-$OMPI_COMM_WORLD_RANK")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == ["rank-0", "rank-1"]


def test_gloo_sets_the_backend_and_the_store():
    cmd = dry("-np", "2", "--gloo", "--gloo-redis", "db:6380", "prog")
    line = " ".join(cmd)
    assert "KOLO_BACKEND=gloo" in cmd and "KOLO_GLOO_REDIS=db:6380" in cmd
    assert "-x KOLO_BACKEND" in line and "-x KOLO_GLOO_REDIS" in line
    r = run("--dry-run", "--gloo-redis", "db:6380", "prog")
    assert r.returncode == 2 and "--gloo-redis is for --gloo" in r.stderr


def test_gloo_starts_a_redis_server_for_the_job_and_stops_it():
    # Every rank reaches the server kolo-run started; once kolo-run returns, it is gone.
    probe = 'exec 3<>/dev/tcp/${KOLO_GLOO_REDIS%:*}/${KOLO_GLOO_REDIS#*:} && echo "$KOLO_BACKEND $KOLO_GLOO_REDIS"'
    r = run("--launcher", "local", "-np", "2", "--oversubscribe", "--gloo", "bash", "-c", probe)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    seen = sorted(l for l in lines if l)
    assert len(seen) == 2 and seen[0] == seen[1] and seen[0].startswith("gloo 127.0.0.1:")
    host, port = seen[0].split()[1].split(":")
    with pytest.raises(OSError):
        socket.create_connection((host, int(port)), timeout=2).close()
