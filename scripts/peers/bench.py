"""recap's two editions side by side with the read APIs one would otherwise write over
PostgreSQL (peers/axum-postgres, peers/fastapi), on the same data and the same load.
Run by scripts/peers/bench.sh (which prepares everything first); docs/performance.md
("Side by side with a Postgres read API") says what it measures and how. A floor is
measured beside them: recap's recorded answers served by hyper's HTTP/1 loop and nothing
else (peers/axum-postgres/src/bin/floor.rs), what answering those bytes costs here.

Placement: each service runs on SERVER_CORE with its database (recap's LMDB is in its
process; PostgreSQL's postmaster and backends are pinned to the same core; the
distributed edition's query-api starts there, and Cassandra's and Redis's threads are
held there during its rounds only, since other users of the machine share those
engines), the load generators on LOAD_CORE: every service gets one core for all its
serving work. The distributed edition is measured when the engines of `make up` run on
this machine, and skipped (saying why) otherwise.
"""
import contextlib
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
# The profiled rounds (PEER_BENCH_PERF_DIR): long enough for a few thousand samples of
# the query-api, which has a fraction of the core.
PERF_SECONDS = int(os.environ.get("PEER_BENCH_PERF_SECONDS", "8"))
PG_BIN, PG_DATA, PG_PORT = os.environ["PEER_PG_BIN"], os.environ["PEER_PG_DATA"], os.environ["PEER_PG_PORT"]
AS_PG = ["runuser", "-u", "postgres", "--"] if os.environ.get("PEER_PG_AS_ROOT") == "1" else []
VENV, TARGET = os.environ["PEER_VENV"], os.environ["PEER_TARGET"]
RECAP = os.environ["RECAP_BIN"]
CACHE = os.path.expanduser("~/.cache/recap/peers")
DATA_VERSION = "1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
DATABASE_URL = f"postgresql://recap@127.0.0.1:{PG_PORT}/recap"
ENGINES_ENV = os.path.expanduser("~/.cache/recap/engines/env")
# Named as the engines' sweep recognises a run's leftovers (scripts/engines/common.sh,
# left_by_gone_runs): what a killed run leaves, the next `make up` deletes.
RUN_ID = f"bench{os.getpid()}_peers"
DISTRIBUTED = "recap-dist"
FLOOR = "floor"
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


def spawn(command, log_file, env=None, cwd=None):
    """Starts a service on SERVER_CORE. Its standard error goes to `log_file`: a pipe
    nobody reads stalls a service once it is full (a driver warning on every reconnect
    fills it in minutes)."""
    with open(log_file, "ab") as errors:
        process = subprocess.Popen(["taskset", "-c", SERVER_CORE] + command, env={**os.environ, **(env or {})}, cwd=cwd,
                                   stdout=subprocess.DEVNULL, stderr=errors, start_new_session=True)
    children.append(process)
    return process


def get(base, path, token, with_headers=False):
    request = urllib.request.Request(base + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            answer = response.status, response.read(), response.getheaders()
    except urllib.error.HTTPError as refused:
        answer = refused.code, refused.read(), list(refused.headers.items())
    return answer if with_headers else answer[:2]


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


def user_system_by_pid(pids):
    """utime and stime of each process still there, in seconds: the time in the process's
    own code and in the kernel for it."""
    seconds = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            seconds[pid] = (int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK)
        except OSError:
            pass
    return seconds


def cpu_by_pid(pids):
    """utime + stime of each process still there, in seconds."""
    return {pid: user + system for pid, (user, system) in user_system_by_pid(pids).items()}


def cpu_seconds(pids):
    return sum(cpu_by_pid(pids).values())


def user_system_between(before, after):
    """utime and stime used between two readings of user_system_by_pid, summed over the
    processes present at both (a process that exited meanwhile, such as an autovacuum
    worker, is left out rather than counted negative)."""
    both = [pid for pid in after if pid in before]
    return (sum(after[pid][0] - before[pid][0] for pid in both), sum(after[pid][1] - before[pid][1] for pid in both))


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


def engines_settings():
    """The engines' addresses and the store's login: RECAP_* variables, else the file `make up` writes."""
    values = {}
    try:
        with open(ENGINES_ENV) as lines:
            for line in lines:
                key, _, value = line.strip().removeprefix("export ").partition("=")
                if value:
                    values[key.strip()] = value.strip().strip("'\"")
    except OSError:
        pass
    names = ADDRESSES + LOGIN
    return {name: os.environ.get(name) or values.get(name) for name in names}


# The engines' addresses, and the store's login (absent when it asks for none).
ADDRESSES = ("RECAP_KAFKA_BROKERS", "RECAP_SCYLLA_NODES", "RECAP_REDIS_URL")
LOGIN = ("RECAP_SCYLLA_USERNAME", "RECAP_SCYLLA_PASSWORD")


def host_port(address):
    host, _, port = address.removeprefix("redis://").split("/")[0].rsplit("@", 1)[-1].partition(":")
    return host, int(port)


def process_of(marker):
    """The process whose command line contains `marker` (the engines of `make up`)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if marker in cmdline.read().replace(b"\0", b" ").decode(errors="replace"):
                        return int(entry)
            except OSError:
                pass
    return None


def local_engines():
    """The engines' settings and the Cassandra and Redis processes, when `make up`'s
    engines answer and run on this machine (their threads are pinned for the rounds);
    otherwise the reason the distributed edition is not measured."""
    settings = engines_settings()
    if not all(settings[name] for name in ADDRESSES):
        return None, f"no engine addresses ({ENGINES_ENV} is missing; `make up` writes it)"
    for name, address in ((name, settings[name]) for name in ADDRESSES):
        try:
            socket.create_connection(host_port(address.split(",")[0]), timeout=2).close()
        except (OSError, ValueError):
            return None, f"nothing answers at {address} ({name}; `make up` starts the engines)"
    missing = [name for name, pid in engine_pids(settings).items() if pid is None]
    if missing:
        return None, f"{' and '.join(missing)} does not run on this machine, so it cannot share the query-api's core"
    return settings, None


def engine_pids(settings):
    """Cassandra's and Redis's processes now: looked up at each use, since other users of
    the machine may restart an engine (fault tests do) and it comes back as another
    process."""
    redis_port = host_port(settings["RECAP_REDIS_URL"])[1]
    return {"cassandra": process_of("CassandraDaemon"), "redis": process_of(f"redis-server 127.0.0.1:{redis_port}")}


def thread_affinities(pid):
    """Each thread's allowed cores (Cpus_allowed_list)."""
    cores = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as status:
                cores[int(tid)] = next(line.split(":", 1)[1].strip() for line in status if line.startswith("Cpus_allowed_list:"))
        except (OSError, StopIteration):
            pass
    return cores


class EnginesOnCore:
    """Every thread of Cassandra and Redis held to SERVER_CORE while inside, each given
    its own cores back after, whether the block finished or failed: the engines are shared
    with other users of the machine and outlive the run (`make up` also gives an engine
    it adopts every core back). Threads started meanwhile get the process's cores."""

    def __init__(self, pids):
        self.pids = pids

    def __enter__(self):
        self.saved = {pid: thread_affinities(pid) for pid in self.pids}
        for pid in self.pids:
            # A thread exiting while taskset walks them fails it partway: once more.
            if subprocess.run(["taskset", "-a", "-cp", SERVER_CORE, str(pid)], capture_output=True).returncode != 0:
                run(["taskset", "-a", "-cp", SERVER_CORE, str(pid)], capture_output=True)
        return self

    def __exit__(self, *exc):
        for pid, threads in self.saved.items():
            process_cores = threads.get(pid)
            if process_cores:
                subprocess.run(["taskset", "-a", "-cp", process_cores, str(pid)], capture_output=True)
            for tid, cores in threads.items():
                if cores != process_cores:
                    subprocess.run(["taskset", "-cp", cores, str(tid)], capture_output=True)
        return False


def thread_cpu(pid):
    """CPU seconds of each thread of a process, by thread name with its numbering
    dropped (Cassandra's pools: `ReadStage-3`, `Native-Transport-Requests-12`, ...)."""
    groups = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as stat:
                text = stat.read()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")].rstrip("0123456789#-: ").strip() or "?"
        fields = text.rsplit(")", 1)[1].split()
        groups[(name, int(tid))] = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return groups


def cpu_by_thread_group(before, after):
    used = {}
    for key, seconds in after.items():
        if key in before:
            used[key[0]] = used.get(key[0], 0.0) + seconds - before[key]
    return used


def redis_cli(url, *args):
    host, port = host_port(url)
    return run(["redis-cli", "-h", host, "-p", str(port), *args], capture_output=True, text=True).stdout


def redis_used_mib(url):
    info = redis_cli(url, "INFO", "memory")
    return next((int(line.split(":")[1]) / 1048576 for line in info.splitlines() if line.startswith("used_memory:")), float("nan"))


class DistributedEdition:
    """recap's distributed edition on the engines of `make up`, under names of this run
    only (topic prefix, keyspace, consumer group, Redis key prefix), all deleted at the
    end: the events produced to Kafka with `recap events append --kafka`, drained by one
    `recap projector` into the run's keyspace (`recap migrate`), read by one
    `recap query-api` started on SERVER_CORE."""

    def __init__(self, settings, work, secret_text):
        self.settings, self.work = settings, work
        self.prefix, self.keyspace = f"{RUN_ID}.", f"recap_{RUN_ID}"
        self.topics_made = self.migrated = False
        self.env = {
            "RECAP_KAFKA_BROKERS": settings["RECAP_KAFKA_BROKERS"],
            "RECAP_KAFKA_TOPIC_PREFIX": self.prefix,
            "RECAP_KAFKA_GROUP": f"{self.prefix}projector",
            "RECAP_SCYLLA_NODES": settings["RECAP_SCYLLA_NODES"],
            "RECAP_SCYLLA_KEYSPACE": self.keyspace,
            "RECAP_REDIS_URL": settings["RECAP_REDIS_URL"],
            "RECAP_REDIS_KEY_PREFIX": f"{RUN_ID}:",
            "RECAP_CURSOR_SECRET": secret_text,
            "RECAP_REST_RATE_LIMIT_PER_MINUTE": "1000000000",
            # As the peers keep a lookup, and as the chart's production values run it.
            "RECAP_TOKEN_CACHE_MS": "1000",
            "RECAP_LOG": "warn",
        }
        # The store's login, when it asks for one (`make up`'s does).
        self.env.update({name: settings[name] for name in LOGIN if settings.get(name)})

    def load(self, events):
        """Topics, keyspace, the events produced and projected; returns the seconds the
        projector took from its start to the last meeting readable."""
        run(["bash", os.path.join(ROOT, "scripts/engines/kafka.sh"), "create-run", self.prefix])
        self.topics_made = True
        self.migrated = True
        # Another user of the engines may be restarting Cassandra (fault tests do): a
        # few tries, as the roles themselves retry their store at start.
        for attempt in range(10):
            migrate = subprocess.run([RECAP, "migrate", "--replication", "{'class': 'SimpleStrategy', 'replication_factor': 1}"],
                                     env={**os.environ, **self.env}, capture_output=True, text=True)
            if migrate.returncode == 0:
                break
            log(f"  recap migrate failed (attempt {attempt + 1}), trying again in 10 s: {migrate.stderr.strip().splitlines()[-1:]}")
            time.sleep(10)
        else:
            raise SystemExit(f"recap migrate failed:\n{migrate.stderr}")
        run([RECAP, "events", "append", "--kafka", self.settings["RECAP_KAFKA_BROKERS"], "--topic-prefix", self.prefix, events], stdout=subprocess.DEVNULL)
        projector_admin, rest, admin = free_ports(3)
        # Not pinned: loading is not measured. Its warnings go to a file (a pipe nobody
        # reads would stall it once full).
        with open(os.path.join(self.work, "projector.log"), "wb") as projector_log:
            self.projector = subprocess.Popen([RECAP, "projector"], env={**os.environ, **self.env, "RECAP_ADMIN_LISTEN": f"127.0.0.1:{projector_admin}"},
                                              stdout=subprocess.DEVNULL, stderr=projector_log, start_new_session=True)
        children.append(self.projector)
        self.projector_admin = f"http://127.0.0.1:{projector_admin}"
        self.query_api = spawn([RECAP, "query-api"], os.path.join(self.work, "query-api.log"), env={**self.env, "RECAP_REST_LISTEN": f"127.0.0.1:{rest}", "RECAP_ADMIN_LISTEN": f"127.0.0.1:{admin}"})
        self.base = f"http://127.0.0.1:{rest}"
        return self.base

    def accounted(self):
        """Events the projector accounted for (applied, stale, skipped, dead-lettered)."""
        try:
            with urllib.request.urlopen(self.projector_admin + "/progress", timeout=5) as response:
                progress = json.loads(response.read())
        except (OSError, ValueError):
            return 0
        return sum(progress.get(key) or 0 for key in ("applied", "stale", "skipped_unknown", "dead_lettered"))

    def wait_projected(self, events, seconds=1800):
        deadline = time.time() + seconds
        while self.accounted() < events:
            if self.projector.poll() is not None:
                raise SystemExit(f"recap projector exited with status {self.projector.returncode}; its log: {os.path.join(self.work, 'projector.log')}")
            if time.time() > deadline:
                raise SystemExit(f"the projector accounted for {self.accounted()} of {events} events within {seconds} s")
            time.sleep(1)

    def stop_projector(self):
        """SIGTERM (it commits its position), then waits: not a part of the reads."""
        self.projector.send_signal(signal.SIGTERM)
        try:
            self.projector.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.projector.kill()

    def processes(self):
        return {"query-api": self.query_api.pid, **self.engines()}

    def engines(self):
        """Cassandra's and Redis's processes (see engine_pids); a missing one stops the run."""
        pids = engine_pids(self.settings)
        for name, pid in pids.items():
            if pid is None:
                raise SystemExit(f"{name} stopped during the run (another user of the engines restarted it?)")
        return pids

    def on_core(self):
        return EnginesOnCore(list(self.engines().values()))

    def remove(self):
        """The run's keyspace, topics and Redis keys go, whatever happened before."""
        if self.migrated:
            subprocess.run(["bash", os.path.join(ROOT, "scripts/engines/cassandra.sh"), "cql", f'DROP KEYSPACE IF EXISTS "{self.keyspace}"'],
                           capture_output=True)
        if self.topics_made:
            subprocess.run(["bash", os.path.join(ROOT, "scripts/engines/kafka.sh"), "delete-run", self.prefix], capture_output=True)
        try:
            keys = redis_cli(self.settings["RECAP_REDIS_URL"], "--scan", "--pattern", f"{RUN_ID}:*").split()
            for start in range(0, len(keys), 500):
                redis_cli(self.settings["RECAP_REDIS_URL"], "DEL", *keys[start:start + 500])
        except (OSError, subprocess.CalledProcessError):
            pass



def cql_port_connections(pid, cql_port):
    """The local ports of `pid`'s TCP connections to `cql_port` (its CQL connections),
    matched through the socket inodes of its file descriptors."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as lines:
                next(lines)
                for line in lines:
                    fields = line.split()
                    local, remote, inode = fields[1], fields[2], fields[9]
                    if inode in inodes and int(remote.rsplit(":", 1)[1], 16) == cql_port:
                        ports.add(int(local.rsplit(":", 1)[1], 16))
        except OSError:
            pass
    return ports


def cql_requests(ports):
    """Requests the node has counted on the connections from `ports`
    (system_views.clients, one row per native-protocol connection)."""
    out = run(["bash", os.path.join(ROOT, "scripts/engines/cassandra.sh"), "cql", "SELECT port, request_count FROM system_views.clients"],
              capture_output=True, text=True).stdout
    total = 0
    for line in out.splitlines():
        port, _, count = line.partition(" | ")
        if port.strip().isdigit() and int(port) in ports:
            total += int(count)
    return total


def requests_per_rest_request(distributed, url, token, seconds):
    """CQL requests and Redis commands per REST request over a round of wrk: the node's
    request counts of the query-api's connections before and after, and Redis's MONITOR
    of the run's keys (the EVALSHA the query-api sends, and the commands its script runs,
    which MONITOR lists as from `lua`). Not a timed round: MONITOR slows Redis."""
    settings = distributed.settings
    ports = cql_port_connections(distributed.query_api.pid, host_port(settings["RECAP_SCYLLA_NODES"].split(",")[0])[1])
    host, port = host_port(settings["RECAP_REDIS_URL"])
    before = cql_requests(ports)
    with tempfile.TemporaryFile() as monitored:
        monitor = subprocess.Popen(["redis-cli", "-h", host, "-p", str(port), "MONITOR"], stdout=monitored, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        _, requests = wrk(url, token, seconds)
        time.sleep(0.5)
        monitor.terminate()
        monitor.wait()
        after = cql_requests(ports)
        monitored.seek(0)
        sent = inner = 0
        for line in monitored.read().decode(errors="replace").splitlines():
            if f'"{RUN_ID}:' not in line:
                continue
            if " lua]" in line:
                inner += 1
            else:
                sent += 1
    # The counting query and the 0.5 s either side of the load add nothing: the node
    # counts per connection, and the query-api is idle outside wrk's round.
    return requests, (after - before) / requests, sent / requests, inner / requests, len(ports)


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


def settle(pids, what, most=0.3, seconds=180):
    """Until the processes together used under `most` of a core for 2 s, or `seconds`
    passed (then says so): Cassandra flushes and compacts for a while after a load, and
    that work is not the reads'. Other users of the engines may keep it busier."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        before = cpu_seconds(pids)
        time.sleep(2)
        used = (cpu_seconds(pids) - before) / 2
        if used < most:
            return used
    log(f"  {what} still used {used * 100:.0f}% of a core after {seconds} s; measuring anyway")
    return used


def main():
    # A TERM ends the run through the `finally` below: the engines get their cores back
    # and the run's keyspace and topics go.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    data = data_dir()
    with open(os.path.join(data, "tokens.json")) as tokens:
        accounts = json.load(tokens)
    with open(os.path.join(data, "events.jsonl"), "rb") as events_file:
        event_count = sum(1 for _ in events_file)
    start_postgres(data)
    engines, engines_missing = local_engines()
    work = tempfile.mkdtemp(prefix="recap-peers-")
    distributed = None
    try:
        # Text, so that the query-api (RECAP_CURSOR_SECRET) signs with the same key bytes
        # as recap serve and the peers (read from the file).
        secret_text = os.urandom(32).hex()
        secret = os.path.join(work, "cursor-secret")
        with open(secret, "w") as out:
            out.write(secret_text)
        os.chmod(secret, 0o600)
        log("appending the events to recap's log and projecting them")
        run([RECAP, "events", "append", "--data-dir", work, os.path.join(data, "events.jsonl")], stdout=subprocess.DEVNULL)
        unlimited = "1000000000"
        started = time.time()
        rest, mcp, admin, axum_port, fastapi_port = free_ports(5)
        spawn([RECAP, "serve", "--data-dir", work, "--rest-listen", f"127.0.0.1:{rest}", "--mcp-listen", f"127.0.0.1:{mcp}", "--admin-listen",
               f"127.0.0.1:{admin}", "--rest-rate-limit-per-minute", unlimited], os.path.join(work, "serve.log"), env={"RUST_LOG": "warn"})
        recap_pid = children[-1].pid
        services = {"recap": {"base": f"http://127.0.0.1:{rest}", "parts": lambda: {"service": [recap_pid]}}}
        peer_env = {"DATABASE_URL": DATABASE_URL, "CURSOR_SECRET_FILE": secret, "RATE_LIMIT_PER_MINUTE": unlimited}
        spawn([os.path.join(TARGET, "peer-axum-postgres")], os.path.join(work, "axum.log"), env={**peer_env, "LISTEN": f"127.0.0.1:{axum_port}"})
        axum_pid = children[-1].pid
        services["axum+pg"] = {"base": f"http://127.0.0.1:{axum_port}", "parts": lambda: {"service": [axum_pid], "postgres": postgres_pids()}}
        spawn([os.path.join(VENV, "bin", "uvicorn"), "app:app", "--app-dir", os.path.join(ROOT, "peers/fastapi"), "--host", "127.0.0.1", "--port", str(fastapi_port),
               "--no-access-log", "--log-level", "warning", "--loop", "uvloop", "--http", "httptools"], os.path.join(work, "fastapi.log"), env=peer_env)
        fastapi_pid = children[-1].pid
        services["fastapi+pg"] = {"base": f"http://127.0.0.1:{fastapi_port}", "parts": lambda: {"service": [fastapi_pid], "postgres": postgres_pids()}}
        for service in services.values():
            service["pid"] = service["parts"]()["service"][0]
        large = accounts["acc_large"]
        last = f"/v1/meetings/{large['prefix']}{large['meetings'] - 1:06d}"
        wait_for(services["recap"]["base"], last, large["token"], "recap serve")
        log(f"  recap projected {sum(a['meetings'] for a in accounts.values())} meetings in {time.time() - started:.0f} s")
        for name in ("axum+pg", "fastapi+pg"):
            wait_for(services[name]["base"], last, large["token"], name, 60)
        wait_idle(services["recap"]["pid"], "recap serve")
        log(f"  recap serve idle {time.time() - started:.0f} s after its start")

        if engines is None:
            print(f"distributed edition: not measured in this run: {engines_missing}")
        else:
            log(f"the distributed edition: producing the events to Kafka (topics {RUN_ID}.*), projecting them into keyspace recap_{RUN_ID}")
            distributed = DistributedEdition(engines, work, secret_text)
            started = time.time()
            base = distributed.load(os.path.join(data, "events.jsonl"))
            wait_for(base, last, large["token"], "recap query-api", 1800)
            distributed.wait_projected(event_count)
            wait_idle(distributed.projector.pid, "recap projector")
            log(f"  recap projector drained {event_count} events from Kafka in {time.time() - started:.0f} s (topics created and the keyspace migrated first)")
            distributed.stop_projector()
            settle([distributed.engines()["cassandra"]], "Cassandra")
            services[DISTRIBUTED] = {"base": base, "pid": distributed.query_api.pid,
                                     "parts": lambda: {"service": [distributed.query_api.pid], **{name: [pid] for name, pid in distributed.engines().items()}}}

        checked, identical = verify(services, accounts)
        print(f"same answers: {checked} responses of the other services compared with recap serve's, all JSON-equal ({identical} byte-identical)")

        def pinned(name):
            """Cassandra and Redis on the query-api's core for the distributed edition's phases."""
            return distributed.on_core() if name == DISTRIBUTED else contextlib.nullcontext()

        small = accounts["acc_small"]
        routes = [
            ("list, 1k account", "/v1/meetings?limit=50", small["token"]),
            ("list, 100k account", "/v1/meetings?limit=50", large["token"]),
            ("detail, 1k account", f"/v1/meetings/{small['prefix']}000500", small["token"]),
            ("detail, 100k account", f"/v1/meetings/{large['prefix']}050000", large["token"]),
        ]
        # The floor: recap's answers to these requests, recorded and served by hyper's
        # HTTP/1 loop alone (peers/axum-postgres/src/bin/floor.rs), so what is left of a
        # request's cost is answering its bytes over HTTP.
        recorded = []
        for _, path, token in routes:
            status, body, headers = get(services["recap"]["base"], path, token, with_headers=True)
            recorded.append({"path": path, "authorization": f"Bearer {token}", "status": status, "headers": headers, "body": body.decode()})
        with open(os.path.join(work, "floor.json"), "w") as out:
            json.dump(recorded, out)
        (floor_port,) = free_ports(1)
        spawn([os.path.join(TARGET, "floor")], os.path.join(work, "floor.log"),
              env={"FLOOR_RESPONSES": os.path.join(work, "floor.json"), "LISTEN": f"127.0.0.1:{floor_port}"})
        floor_pid = children[-1].pid
        services[FLOOR] = {"base": f"http://127.0.0.1:{floor_port}", "pid": floor_pid, "parts": lambda: {"service": [floor_pid]}}
        wait_for(services[FLOOR]["base"], routes[0][1], routes[0][2], FLOOR, 30)
        for (_, path, token), each in zip(routes, recorded):
            if get(services[FLOOR]["base"], path, token)[1] != each["body"].encode():
                raise SystemExit(f"the floor does not answer {each['path']} with recap's bytes")
        names = list(services)
        # The read APIs: every name but the floor, which is only timed for throughput.
        serving = [name for name in names if name != FLOOR]
        # Warm every route on every service (connections, prepared statements, caches).
        for _, path, token in routes:
            for name in names:
                with pinned(name):
                    wrk(services[name]["base"] + path, token, 1)
        if distributed:
            with distributed.on_core():
                background = settle(list(distributed.engines().values()), "Cassandra and Redis", most=1.0, seconds=2)
            print(f"\nCassandra and Redis with no load from this run, held to core {SERVER_CORE}: {background * 100:.0f}% of the core "
                  "(their own background work and other users of the shared engines; counted in the distributed edition's figures below)")
        parts_order = ["service", "postgres", "cassandra", "redis"]
        results = {}
        print(f"\nthroughput: wrk -t1 -c32 on core {LOAD_CORE}, each service and its database on core {SERVER_CORE}; "
              f"{ROUNDS} rounds of {SECONDS} s per route, services alternating (order rotated each round); medians")
        for label, path, token in routes:
            samples = {name: [] for name in names}
            for round_index in range(ROUNDS):
                order = names[round_index % len(names):] + names[:round_index % len(names)]
                for name in order:
                    service = services[name]
                    with pinned(name):
                        parts = service["parts"]()
                        before, started_at = {part: user_system_by_pid(pids) for part, pids in parts.items()}, time.time()
                        rate, requests = wrk(service["base"] + path, token, SECONDS)
                        after, ended_at = {part: user_system_by_pid(pids) for part, pids in parts.items()}, time.time()
                    split_by_part = {part: user_system_between(before[part], after[part]) for part in parts}
                    used = {part: sum(split) for part, split in split_by_part.items()}
                    share = sum(used.values()) / (ended_at - started_at)
                    split = tuple(seconds / requests * 1e6 for seconds in split_by_part["service"])
                    samples[name].append((rate, {part: seconds / requests * 1e6 for part, seconds in used.items()}, share, split))
            results[label] = {
                name: (statistics.median(sample[0] for sample in samples[name]),
                       {part: statistics.median(sample[1][part] for sample in samples[name]) for part in samples[name][0][1]},
                       statistics.median(sample[2] for sample in samples[name]),
                       tuple(statistics.median(sample[3][index] for sample in samples[name]) for index in range(2)))
                for name in names
            }
        print(f"  {'route':<22} {'service':<11} {'req/s':>7} {'core used':>9} {'CPU µs/req: service':>20} {'postgres':>9} {'cassandra':>9} {'redis':>6} {'total':>7}"
              f" {'req/CPU-s':>10}   {'recap ÷ this: req/s':>19} {'req/CPU-s':>9}")
        for label, by_service in results.items():
            recap_rate, recap_us = by_service["recap"][0], sum(by_service["recap"][1].values())
            for name, (rate, parts, share, _) in by_service.items():
                total = sum(parts.values())
                shown = {part: f"{parts[part]:.1f}" if part in parts else "-" for part in parts_order}
                print(f"  {label:<22} {name:<11} {rate:>7.0f} {share * 100:>8.0f}% {shown['service']:>20} {shown['postgres']:>9} {shown['cassandra']:>9} {shown['redis']:>6}"
                      f" {total:>7.1f} {1e6 / total:>10.0f}   {recap_rate / rate:>18.1f}× {total / recap_us:>8.1f}×")
        print("  core used: the CPU time of the service and its database over the round's wall time (under 100%, something else had the core part of the")
        print("  time); req/CPU-s: requests per second of CPU time of the service and its database, the throughput per core the sharing does not hide")
        if distributed:
            print(f"  {DISTRIBUTED}: recap query-api, Cassandra (standing in for ScyllaDB, 1 GiB heap, a node shared with other users of the machine) and Redis"
                  f" all held to core {SERVER_CORE} during its rounds; Cassandra's and Redis's CPU counts whatever else they did meanwhile")
        print("\nthe service's own CPU per request split (utime / stime, µs): in its code and libraries, and in the kernel for it (its sockets,"
              " and on loopback the delivery of each answer to the client's socket)")
        for label, by_service in results.items():
            print(f"  {label:<22} " + "   ".join(f"{name} {split[0]:.1f} / {split[1]:.1f}" for name, (_, _, _, split) in by_service.items()))

        if distributed:
            print(f"\nwhere {DISTRIBUTED}'s CPU goes, one more {SECONDS} s round of each 100k-account route: µs per request by process and thread group")
            for label, path, token in [routes[1], routes[3]]:
                with distributed.on_core():
                    before = {process: thread_cpu(pid) for process, pid in distributed.processes().items()}
                    _, requests = wrk(services[DISTRIBUTED]["base"] + path, token, SECONDS)
                    after = {process: thread_cpu(pid) for process, pid in distributed.processes().items()}
                for process in before:
                    groups = cpu_by_thread_group(before[process], after[process])
                    total = sum(groups.values())
                    top = sorted(groups.items(), key=lambda item: -item[1])[:6]
                    print(f"  {label:<22} {process:<10} {total / requests * 1e6:>7.1f} µs: "
                          + ", ".join(f"{name} {seconds / requests * 1e6:.1f}" for name, seconds in top if seconds > 0))

        if distributed:
            print(f"\nwhat {DISTRIBUTED} asks of its stores per REST request, one more {SECONDS} s round of each route (its CQL connections' request counts in"
                  " system_views.clients; the run's Redis keys in MONITOR):")
            for label, path, token in routes:
                requests, cql, sent, inner, connections = requests_per_rest_request(distributed, services[DISTRIBUTED]["base"] + path, token, SECONDS)
                print(f"  {label:<22} {requests:>6} requests: {cql:.3f} CQL requests ({connections} connections), {sent:.3f} Redis commands sent"
                      f" ({inner:.2f} run by its script)")
            perf_dir = os.environ.get("PEER_BENCH_PERF_DIR")
            if perf_dir:
                os.makedirs(perf_dir, exist_ok=True)
                for label, path, token in [routes[1], routes[3]]:
                    output = os.path.join(perf_dir, ("list" if "list" in label else "detail") + ".perf.data")
                    with distributed.on_core():
                        perf = subprocess.Popen(["perf", "record", "-q", "-F", "2999", "--call-graph", "dwarf,8192", "-p", str(distributed.query_api.pid), "-o", output],
                                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                        time.sleep(0.5)
                        wrk(services[DISTRIBUTED]["base"] + path, token, PERF_SECONDS)
                        perf.send_signal(signal.SIGINT)
                        perf.wait()
                    print(f"  perf profile of the query-api, {label}: {output}")

        print(f"\nlatency, open loop ({LATENCY_SECONDS} s, 64 connections, each request timed from its scheduled instant), at fixed offered rates:")
        print("half of each service's maximum above, offered to every service that reaches twice that rate")
        for label, path, token in [routes[1], routes[3]]:
            maxima = {name: results[label][name][0] for name in serving}
            rates = sorted({round(maximum / 2) for maximum in maxima.values()})
            for rate in rates:
                for name in serving:
                    if rate > maxima[name] / 2 * 1.01:
                        continue
                    with pinned(name):
                        latency = open_loop(services[name]["base"], path, token, rate, LATENCY_SECONDS)
                    lost = f", {latency['scheduled'] - latency['answered']} unanswered" if latency["answered"] < latency["scheduled"] else ""
                    print(f"  {label:<22} at {rate:>6} req/s  {name:<11} p50 {latency['p50']:>7.2f} ms  p99 {latency['p99']:>7.2f} ms  max {latency['max']:>7.2f} ms"
                          f"{lost}{', ' + str(latency['non_200']) + ' not 200' if latency['non_200'] else ''}")

        pg_pss = sum(memory_mib(pid, proportional=True) for pid in postgres_pids())
        print("\nmemory after the load: " + ", ".join(f"{name} {memory_mib(services[name]['pid']):.0f} MiB RSS" for name in serving)
              + f"; PostgreSQL (postmaster and backends) {pg_pss:.0f} MiB PSS (shared_buffers 512 MB, the data loaded in it);"
              " recap's RSS counts the pages of its memory-mapped store it touched")
        if distributed:
            print(f"  {DISTRIBUTED}: the query-api above; Cassandra {memory_mib(distributed.engines()['cassandra']):.0f} MiB RSS (the whole shared node, 1 GiB heap),"
                  f" Redis used_memory {redis_used_mib(engines['RECAP_REDIS_URL']):.1f} MiB (every user's keys)")

        def per_cpu_second(name, label):
            return 1e6 / sum(results[label][name][1].values())

        def ratios(numerator, denominator):
            return [(per_cpu_second(numerator, label) / per_cpu_second(denominator, label), results[label][numerator][0] / results[label][denominator][0])
                    for label in ("list, 100k account", "detail, 100k account")]

        (list_cpu, list_rate), (detail_cpu, detail_rate) = ratios("recap", "axum+pg")
        print(f"\nrecap ÷ axum+pg, 100k account: requests per CPU-second {list_cpu:.1f}× (list), {detail_cpu:.1f}× (detail) (target ≥ 10×);"
              f" requests/s on the shared core {list_rate:.1f}× / {detail_rate:.1f}×")
        (list_cpu, list_rate), (detail_cpu, detail_rate) = ratios(FLOOR, "axum+pg")
        (list_share, _), (detail_share, _) = ratios("recap", FLOOR)
        print(f"{FLOOR} ÷ axum+pg, 100k account: requests per CPU-second {list_cpu:.1f}× (list), {detail_cpu:.1f}× (detail): the most a service on hyper's"
              f" HTTP/1 loop answering these bytes could reach against the peer here; recap does {list_share * 100:.0f}% / {detail_share * 100:.0f}% of the floor's requests"
              " per CPU-second")
        if distributed:
            (list_cpu, list_rate), (detail_cpu, detail_rate) = ratios(DISTRIBUTED, "axum+pg")
            print(f"{DISTRIBUTED} ÷ axum+pg, 100k account: requests per CPU-second {list_cpu:.2f}× (list), {detail_cpu:.2f}× (detail) (target > 1×);"
                  f" requests/s on the shared core {list_rate:.2f}× / {detail_rate:.2f}×")
    except BaseException:
        # The services' own words on what went wrong, before their directory goes.
        for name in sorted(os.listdir(work)):
            if name.endswith(".log"):
                with open(os.path.join(work, name), errors="replace") as lines:
                    tail = lines.readlines()[-5:]
                if tail:
                    log(f"the end of {name}:\n" + "".join(tail))
        raise
    finally:
        for process in children:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=20)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if distributed:
            distributed.remove()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
