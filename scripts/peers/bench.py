"""recap's embedded edition side by side with the read APIs one would otherwise write over
PostgreSQL 15 (peers/axum-postgres, peers/fastapi), on the same data and the same load.
Run by scripts/peers/bench.sh (which prepares everything first); docs/performance.md
("Side by side with a Postgres read API") says what it measures and how.

Placement: each service runs on SERVER_CORE with its database (recap's LMDB is in its
process; PostgreSQL's postmaster and backends are pinned to the same core), the load
generators on LOAD_CORE: every service gets one core for all its serving work.
"""
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SERVER_CORE, LOAD_CORE = os.environ.get("PEER_SERVER_CORE", "0"), os.environ.get("PEER_LOAD_CORE", "1")
ROUNDS = int(os.environ.get("PEER_BENCH_ROUNDS", "3"))
SECONDS = int(os.environ.get("PEER_BENCH_SECONDS", "3"))
LATENCY_SECONDS = int(os.environ.get("PEER_BENCH_LATENCY_SECONDS", "5"))
PG_BIN, PG_DATA, PG_PORT = os.environ["PEER_PG_BIN"], os.environ["PEER_PG_DATA"], os.environ["PEER_PG_PORT"]
AS_PG = ["runuser", "-u", "postgres", "--"] if os.environ.get("PEER_PG_AS_ROOT") == "1" else []
VENV, TARGET = os.environ["PEER_VENV"], os.environ["PEER_TARGET"]
RECAP = os.environ["RECAP_BIN"]
CACHE = os.path.expanduser("~/.cache/recap/peers")
DATA_VERSION = "1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
DATABASE_URL = f"postgresql://recap@127.0.0.1:{PG_PORT}/recap"
children = []


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def run(command, **kwargs):
    return subprocess.run(command, check=True, **kwargs)


def psql(sql, database="recap", user="recap", cwd=None):
    out = run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", PG_PORT, "-U", user, "-d", database, "-c", sql],
              capture_output=True, text=True, cwd=cwd)
    return out.stdout.strip()


def data_dir():
    out = os.path.join(CACHE, f"data-v{DATA_VERSION}")
    if not os.path.exists(os.path.join(out, "tokens.json")):
        log("generating the data (1k- and 100k-meeting accounts)")
        shutil.rmtree(out, ignore_errors=True)
        run([sys.executable, os.path.join(ROOT, "scripts/peers/gen.py"), out + ".partial"])
        os.rename(out + ".partial", out)
    return out


def postgres_pids():
    """The postmaster and every process it started (backends, checkpointer, ...)."""
    with open(os.path.join(PG_DATA, "postmaster.pid")) as pidfile:
        postmaster = int(pidfile.readline())
    pids = [postmaster]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == postmaster:
                        pids.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return pids


def start_postgres(data):
    if subprocess.run(AS_PG + [f"{PG_BIN}/pg_ctl", "-D", PG_DATA, "status"], capture_output=True).returncode != 0:
        log("starting PostgreSQL on core", SERVER_CORE)
        run(AS_PG + ["taskset", "-c", SERVER_CORE, f"{PG_BIN}/pg_ctl", "-D", PG_DATA, "-l", os.path.join(PG_DATA, "server.log"), "-w", "start"],
            stdout=subprocess.DEVNULL)
    for pid in postgres_pids():
        subprocess.run(["taskset", "-a", "-cp", SERVER_CORE, str(pid)], capture_output=True)
    if psql("SELECT 1 FROM pg_roles WHERE rolname = 'recap'", database="postgres", user="postgres") != "1":
        psql("CREATE ROLE recap LOGIN", database="postgres", user="postgres")
        psql("CREATE DATABASE recap OWNER recap", database="postgres", user="postgres")
    loaded = psql("SELECT to_regclass('data_version') IS NOT NULL")
    if loaded != "t" or psql("SELECT version FROM data_version") != DATA_VERSION:
        log("loading the rows into PostgreSQL (COPY, index, VACUUM ANALYZE)")
        started = time.time()
        run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", PG_PORT, "-U", "recap", "-d", "recap", "-f",
             os.path.join(ROOT, "scripts/peers/schema.sql")], cwd=data, stdout=subprocess.DEVNULL)
        psql(f"DROP TABLE IF EXISTS data_version; CREATE TABLE data_version AS SELECT '{DATA_VERSION}'::text AS version")
        log(f"  loaded in {time.time() - started:.0f} s")
    # Warm the buffers: every run measures a database whose data is in memory.
    psql("SELECT count(*) FROM (SELECT note, summaries, participants, action_items FROM meetings) AS everything")


def spawn(command, env=None, cwd=None):
    process = subprocess.Popen(["taskset", "-c", SERVER_CORE] + command, env={**os.environ, **(env or {})}, cwd=cwd,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    children.append(process)
    return process


def get(base, path, token):
    request = urllib.request.Request(base + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()


def wait_for(base, path, token, what, seconds=600):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if get(base, path, token)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{what} did not answer {path} within {seconds} s")


def wait_idle(pid, what, seconds=300):
    """Until the process used under 5% of a core for 2 s: recap serve keeps working for a
    while after the projector caught up (the webhooks runtime turns the projected changes
    into the account feeds), and that work is not the requests'."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        before = cpu_seconds([pid])
        time.sleep(2)
        if cpu_seconds([pid]) - before < 0.1:
            return
    raise SystemExit(f"{what} stayed busy for {seconds} s")


def cpu_by_pid(pids):
    """utime + stime of each process still there, in seconds."""
    seconds = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            seconds[pid] = (int(fields[11]) + int(fields[12])) / CLK_TCK
        except OSError:
            pass
    return seconds


def cpu_seconds(pids):
    return sum(cpu_by_pid(pids).values())


def cpu_between(before, after):
    """CPU time used between two readings by the processes present at both (a process
    that exited meanwhile, such as an autovacuum worker, is left out rather than counted
    negative)."""
    return sum(after[pid] - before[pid] for pid in after if pid in before)


def memory_mib(pid, proportional=False):
    """VmRSS of a process (or Pss: shared pages divided among the processes that map them)."""
    path, key = (f"/proc/{pid}/smaps_rollup", "Pss:") if proportional else (f"/proc/{pid}/status", "VmRSS:")
    try:
        with open(path) as lines:
            for line in lines:
                if line.startswith(key):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def free_ports(count):
    """Ports nothing listens on now (other processes on this machine serve on fixed ones)."""
    sockets = [socket.socket() for _ in range(count)]
    for each in sockets:
        each.bind(("127.0.0.1", 0))
    ports = [each.getsockname()[1] for each in sockets]
    for each in sockets:
        each.close()
    return ports


def wrk(url, token, seconds):
    script = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
    script.write(f'wrk.headers["Authorization"] = "Bearer {token}"\n')
    script.close()
    out = run(["taskset", "-c", LOAD_CORE, "wrk", "-t1", "-c32", f"-d{seconds}s", "-s", script.name, url], capture_output=True, text=True).stdout
    os.unlink(script.name)
    if "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit(f"{url}: wrk saw failures:\n{out}")
    requests = int(next(line for line in out.splitlines() if " requests in " in line).split()[0])
    rate = float(next(line for line in out.splitlines() if line.startswith("Requests/sec:")).split()[1])
    return rate, requests


def open_loop(base, path, token, rate, seconds):
    out = run(["taskset", "-c", LOAD_CORE, os.path.join(TARGET, "open-loop"), base.replace("http://", ""), path, token, f"{rate:.0f}", str(seconds)],
              capture_output=True, text=True).stdout
    return json.loads(out)


def canonical(body):
    """The JSON, keys sorted; of an error, what clients branch on (docs/rest.md: the
    code and its extra fields; `message` may change)."""
    value = json.loads(body)
    if isinstance(value, dict) and "error" in value:
        value = {key: field for key, field in value["error"].items() if key != "message"}
    return json.dumps(value, sort_keys=True)


def verify(services, accounts):
    """Every service answers what recap answers: list pages followed by their cursors,
    details, a missing meeting, an unknown token. Stops the run on any difference."""
    recap_base = services["recap"]["base"]
    checked, identical = 0, 0

    def compare(path, token):
        nonlocal checked, identical
        status, expected = get(recap_base, path, token)
        for name, service in services.items():
            if name == "recap":
                continue
            got_status, got = get(service["base"], path, token)
            if got_status != status or canonical(got) != canonical(expected):
                raise SystemExit(f"{name} answers {path} differently from recap:\n  recap ({status}): {expected[:600]!r}\n  {name} ({got_status}): {got[:600]!r}")
            checked += 1
            identical += got == expected
        return status, expected

    for account, info in accounts.items():
        token = info["token"]
        pages = 20 if info["meetings"] <= 1000 else 40
        path = "/v1/meetings?limit=50"
        for _ in range(pages):
            status, body = compare(path, token)
            cursor = json.loads(body).get("next_cursor")
            if status != 200 or not cursor:
                break
            path = f"/v1/meetings?limit=50&cursor={cursor}"
        compare("/v1/meetings?limit=200", token)
        for index in range(0, info["meetings"], max(1, info["meetings"] // 25)):
            compare(f"/v1/meetings/{info['prefix']}{index:06d}", token)
        compare(f"/v1/meetings/{info['prefix']}999999", token)
    compare("/v1/meetings?limit=50", "svc_pat_unknown")
    compare("/v1/meetings?limit=0", accounts["acc_small"]["token"])
    return checked, identical


def main():
    data = data_dir()
    with open(os.path.join(data, "tokens.json")) as tokens:
        accounts = json.load(tokens)
    start_postgres(data)
    work = tempfile.mkdtemp(prefix="recap-peers-")
    try:
        secret = os.path.join(work, "cursor-secret")
        with open(secret, "wb") as out:
            out.write(os.urandom(32))
        os.chmod(secret, 0o600)
        log("appending the events to recap's log and projecting them")
        run([RECAP, "events", "append", "--data-dir", work, os.path.join(data, "events.jsonl")], stdout=subprocess.DEVNULL)
        unlimited = "1000000000"
        started = time.time()
        rest, mcp, admin, axum_port, fastapi_port = free_ports(5)
        spawn([RECAP, "serve", "--data-dir", work, "--rest-listen", f"127.0.0.1:{rest}", "--mcp-listen", f"127.0.0.1:{mcp}", "--admin-listen",
               f"127.0.0.1:{admin}", "--rest-rate-limit-per-minute", unlimited], env={"RUST_LOG": "warn"})
        services = {"recap": {"base": f"http://127.0.0.1:{rest}", "pid": children[-1].pid, "db": False}}
        peer_env = {"DATABASE_URL": DATABASE_URL, "CURSOR_SECRET_FILE": secret, "RATE_LIMIT_PER_MINUTE": unlimited}
        spawn([os.path.join(TARGET, "peer-axum-postgres")], env={**peer_env, "LISTEN": f"127.0.0.1:{axum_port}"})
        services["axum+pg"] = {"base": f"http://127.0.0.1:{axum_port}", "pid": children[-1].pid, "db": True}
        spawn([os.path.join(VENV, "bin", "uvicorn"), "app:app", "--app-dir", os.path.join(ROOT, "peers/fastapi"), "--host", "127.0.0.1", "--port", str(fastapi_port),
               "--no-access-log", "--log-level", "warning", "--loop", "uvloop", "--http", "httptools"], env=peer_env)
        services["fastapi+pg"] = {"base": f"http://127.0.0.1:{fastapi_port}", "pid": children[-1].pid, "db": True}
        large = accounts["acc_large"]
        last = f"/v1/meetings/{large['prefix']}{large['meetings'] - 1:06d}"
        wait_for(services["recap"]["base"], last, large["token"], "recap serve")
        log(f"  recap projected {sum(a['meetings'] for a in accounts.values())} meetings in {time.time() - started:.0f} s")
        for name in ("axum+pg", "fastapi+pg"):
            wait_for(services[name]["base"], last, large["token"], name, 60)
        wait_idle(services["recap"]["pid"], "recap serve")
        log(f"  recap serve idle {time.time() - started:.0f} s after its start")

        checked, identical = verify(services, accounts)
        print(f"same answers: {checked} responses of the peers compared with recap's, all JSON-equal ({identical} byte-identical)")

        small = accounts["acc_small"]
        routes = [
            ("list, 1k account", "/v1/meetings?limit=50", small["token"]),
            ("list, 100k account", "/v1/meetings?limit=50", large["token"]),
            ("detail, 1k account", f"/v1/meetings/{small['prefix']}000500", small["token"]),
            ("detail, 100k account", f"/v1/meetings/{large['prefix']}050000", large["token"]),
        ]
        names = list(services)
        # Warm every route on every service (connections, prepared statements, caches).
        for _, path, token in routes:
            for name in names:
                wrk(services[name]["base"] + path, token, 1)
        results = {}
        print(f"\nthroughput: wrk -t1 -c32 on core {LOAD_CORE}, each service and its database on core {SERVER_CORE}; "
              f"{ROUNDS} rounds of {SECONDS} s per route, services alternating (order rotated each round); medians")
        for label, path, token in routes:
            samples = {name: [] for name in names}
            for round_index in range(ROUNDS):
                order = names[round_index % len(names):] + names[:round_index % len(names)]
                for name in order:
                    service = services[name]
                    pg = postgres_pids()
                    before_pg, before = cpu_by_pid(pg), (cpu_seconds([service["pid"]]), time.time())
                    rate, requests = wrk(service["base"] + path, token, SECONDS)
                    after_pg, after = cpu_by_pid(pg), (cpu_seconds([service["pid"]]), time.time())
                    pg_seconds = cpu_between(before_pg, after_pg)
                    before, after = (before[0], 0.0, before[1]), (after[0], pg_seconds, after[1])
                    share = (after[0] - before[0] + after[1] - before[1]) / (after[2] - before[2])
                    samples[name].append((rate, (after[0] - before[0]) / requests * 1e6, (after[1] - before[1]) / requests * 1e6, share))
            results[label] = {name: tuple(statistics.median(sample[i] for sample in samples[name]) for i in range(4)) for name in names}
        print(f"  {'route':<22} {'service':<11} {'req/s':>7} {'core used':>9} {'CPU µs/req: service':>20} {'postgres':>9} {'total':>7} {'req/CPU-s':>10}   {'recap ÷ this: req/s':>19} {'req/CPU-s':>9}")
        for label, by_service in results.items():
            recap_rate, recap_us = by_service["recap"][0], by_service["recap"][1] + by_service["recap"][2]
            for name, (rate, service_us, pg_us, share) in by_service.items():
                total = service_us + pg_us
                print(f"  {label:<22} {name:<11} {rate:>7.0f} {share * 100:>8.0f}% {service_us:>20.1f} {pg_us:>9.1f} {total:>7.1f} {1e6 / total:>10.0f}"
                      f"   {recap_rate / rate:>18.1f}× {total / recap_us:>8.1f}×")
        print("  core used: the service's and PostgreSQL's CPU time over the round's wall time (under 100%, something else had the core part of the")
        print("  time); req/CPU-s: requests per second of CPU time of the service and its database, the throughput per core the sharing does not hide")

        print(f"\nlatency, open loop ({LATENCY_SECONDS} s, 64 connections, each request timed from its scheduled instant), at fixed offered rates:")
        print("half of each Postgres peer's maximum above, offered to every service that reaches twice that rate, and half of recap's own")
        for label, path, token in [routes[1], routes[3]]:
            maxima = {name: results[label][name][0] for name in names}
            rates = sorted({round(maxima["fastapi+pg"] / 2), round(maxima["axum+pg"] / 2), round(maxima["recap"] / 2)})
            for rate in rates:
                for name in names:
                    if rate > maxima[name] / 2 * 1.01:
                        continue
                    latency = open_loop(services[name]["base"], path, token, rate, LATENCY_SECONDS)
                    lost = f", {latency['scheduled'] - latency['answered']} unanswered" if latency["answered"] < latency["scheduled"] else ""
                    print(f"  {label:<22} at {rate:>6} req/s  {name:<11} p50 {latency['p50']:>7.2f} ms  p99 {latency['p99']:>7.2f} ms  max {latency['max']:>7.2f} ms"
                          f"{lost}{', ' + str(latency['non_200']) + ' not 200' if latency['non_200'] else ''}")

        pg_pss = sum(memory_mib(pid, proportional=True) for pid in postgres_pids())
        print("\nmemory after the load: " + ", ".join(f"{name} {memory_mib(services[name]['pid']):.0f} MiB RSS" for name in names)
              + f"; PostgreSQL (postmaster and backends) {pg_pss:.0f} MiB PSS (shared_buffers 512 MB, the data loaded in it);"
              " recap's RSS counts the pages of its memory-mapped store it touched")
        recap_list, axum_list = results["list, 100k account"]["recap"], results["list, 100k account"]["axum+pg"]
        recap_detail, axum_detail = results["detail, 100k account"]["recap"], results["detail, 100k account"]["axum+pg"]
        print(f"\nrecap ÷ axum+pg, 100k account: requests per CPU-second {(axum_list[1] + axum_list[2]) / (recap_list[1] + recap_list[2]):.1f}× (list),"
              f" {(axum_detail[1] + axum_detail[2]) / (recap_detail[1] + recap_detail[2]):.1f}× (detail) (target ≥ 10×);"
              f" requests/s on the shared core {recap_list[0] / axum_list[0]:.1f}× / {recap_detail[0] / axum_detail[0]:.1f}×")
    finally:
        for process in children:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
