#!/usr/bin/env bash
# Apache Kafka, one KRaft node (broker and controller in one process), from the broker's
# jars on Maven Central (the distribution tarball is not published there), on
# 127.0.0.1:9092 (controller 127.0.0.1:9093; SASL/PLAIN on 127.0.0.1:9094, for the tests
# of a client that authenticates), heap capped at 1 GiB (Kafka's own default).
# Readiness is a real metadata request (the topics tool listing the topics). Automatic
# topic creation is off: `start` creates the topics recap uses, idempotently.
#
# usage: kafka.sh install|start|stop|restart|status|kill9|pause|resume
#        kafka.sh topics             the topics, one per line
#        kafka.sh sweep              deletes the topics of test and benchmark runs that
#                                    are gone (common.sh, left_by_gone_runs)
#        kafka.sh create-run PREFIX  creates recap's topics under PREFIX (a run's own set,
#                                    named so that `sweep` recognises it, e.g. bench<pid>_x.)
#        kafka.sh delete-run PREFIX  deletes the topics under PREFIX
set -euo pipefail
ENGINE=kafka
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

VERSION=${RECAP_KAFKA_VERSION:-4.3.1}
MAJOR=${VERSION%%.*}
# Kafka 4 logs through Log4j 2, Kafka 3 through reload4j; neither binding is a
# dependency of the broker artifact, the distribution adds it.
LOG4J2_VERSION=2.25.4
HOME_DIR="$ENGINES_HOME/kafka-$VERSION"
DIR="$RUN_DIR/kafka"
PIDFILE="$DIR/kafka.pid"
PID_MARKER="$DIR/server.properties"
PORTS=("$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT" "$KAFKA_SASL_PORT")
LOG_FILES=("$DIR/server.log" "$DIR/stdout.log")
TOPICS=(recap.accounts.v1:3 recap.meetings.v1:3 recap.sharing.v1:3 recap.deadletter.v1:1 recap.messages.v1:3)

install() {
  local binding=org.slf4j:slf4j-reload4j:1.7.36
  [ "$MAJOR" -ge 4 ] && binding=org.apache.logging.log4j:log4j-slf4j-impl:$LOG4J2_VERSION
  resolve_jars "$HOME_DIR" "org.apache.kafka:kafka_2.13:$VERSION" "org.apache.kafka:kafka-tools:$VERSION" "$binding"
}

# The admin tools' settings (short timeouts, warnings only, to stderr), written once.
tool_configs() {
  [ -f "$DIR/admin.properties" ] && return 0
  mkdir -p "$DIR"
  cat >"$DIR/admin.properties.$$" <<PROPS
request.timeout.ms=5000
default.api.timeout.ms=10000
socket.connection.setup.timeout.ms=2000
PROPS
  cat >"$DIR/tools-log4j2.properties.$$" <<PROPS
appender.err.type=Console
appender.err.name=err
appender.err.target=SYSTEM_ERR
appender.err.layout.type=PatternLayout
appender.err.layout.pattern=%p %m%n
rootLogger.level=WARN
rootLogger.appenderRef.err.ref=err
PROPS
  cat >"$DIR/tools-log4j.properties.$$" <<PROPS
log4j.rootLogger=WARN, err
log4j.appender.err=org.apache.log4j.ConsoleAppender
log4j.appender.err.Target=System.err
log4j.appender.err.layout=org.apache.log4j.PatternLayout
log4j.appender.err.layout.ConversionPattern=%p %m%n
PROPS
  mv "$DIR/tools-log4j2.properties.$$" "$DIR/tools-log4j2.properties"
  mv "$DIR/tools-log4j.properties.$$" "$DIR/tools-log4j.properties"
  mv "$DIR/admin.properties.$$" "$DIR/admin.properties"
}

# The admin tools: a small, quickly started JVM.
tool() {
  need_java17
  tool_configs
  timeout 60 "$JAVA17" -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$DIR/tools-log4j2.properties" -Dlog4j.configuration="file:$DIR/tools-log4j.properties" \
    -cp "$HOME_DIR/libs/*" "$@"
}

admin() { tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$BIND:$KAFKA_PORT" --command-config "$DIR/admin.properties" "$@"; }

# Readiness: the listener accepts connections and a metadata request succeeds.
ready() { port_open "$KAFKA_PORT" && admin --list >/dev/null; }

configure() {
  mkdir -p "$DIR/data"
  cat >"$DIR/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$BIND:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://$BIND:$KAFKA_PORT,CONTROLLER://$BIND:$KAFKA_CONTROLLER_PORT,SASL_PLAINTEXT://$BIND:$KAFKA_SASL_PORT
advertised.listeners=PLAINTEXT://$BIND:$KAFKA_PORT,SASL_PLAINTEXT://$BIND:$KAFKA_SASL_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT
listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$KAFKA_SASL_USERNAME="$KAFKA_SASL_PASSWORD";
log.dirs=$DIR/data
auto.create.topics.enable=false
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=5
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=5
group.initial.rebalance.delay.ms=0
# A restarted (or killed) node registers again only once its previous session expired.
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=4000
num.network.threads=2
num.io.threads=4
background.threads=4
num.recovery.threads.per.data.dir=1
log.cleaner.threads=1
log.retention.hours=24
log.segment.bytes=67108864
PROPS
  if [ "$MAJOR" -ge 4 ]; then
    cat >>"$DIR/server.properties" <<PROPS
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=1
PROPS
  fi
  # The broker logs to server.log (INFO, rolled at 20 MB).
  cat >"$DIR/log4j2.properties" <<PROPS
appender.file.type=RollingFile
appender.file.name=file
appender.file.fileName=$DIR/server.log
appender.file.filePattern=$DIR/server.log.%i
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c)%n
appender.file.policies.type=Policies
appender.file.policies.size.type=SizeBasedTriggeringPolicy
appender.file.policies.size.size=20MB
appender.file.strategy.type=DefaultRolloverStrategy
appender.file.strategy.max=2
rootLogger.level=INFO
rootLogger.appenderRef.file.ref=file
logger.state.name=state.change.logger
logger.state.level=WARN
logger.request.name=kafka.request.logger
logger.request.level=WARN
PROPS
  cat >"$DIR/log4j.properties" <<PROPS
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File=$DIR/server.log
log4j.appender.file.MaxFileSize=20MB
log4j.appender.file.MaxBackupIndex=2
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.request.logger=WARN
PROPS
  if [ ! -f "$DIR/data/meta.properties" ]; then
    local cluster_id
    cluster_id=$(tool kafka.tools.StorageTool random-uuid)
    log "formatting the KRaft log directory (cluster id $cluster_id)"
    tool kafka.tools.StorageTool format --cluster-id "$cluster_id" --config "$DIR/server.properties" >"$DIR/format.log" 2>&1 ||
      { cat "$DIR/format.log" >&2; die "formatting $DIR/data failed"; }
  fi
}

# Creates the topics recap uses that do not exist yet (one listing, then only what is missing).
ensure_topics() {
  local existing created=()
  existing=$(admin --list)
  for entry in "${TOPICS[@]}"; do
    local topic=${entry%%:*} partitions=${entry##*:}
    grep -qxF "$topic" <<<"$existing" && continue
    admin --create --if-not-exists --topic "$topic" --partitions "$partitions" --replication-factor 1 >/dev/null
    created+=("$topic")
  done
  if [ ${#created[@]} -gt 0 ]; then log "created topics: ${created[*]}"; else log "topics present: ${TOPICS[*]%%:*}"; fi
}

# Deletes the topics runs that are gone left behind, 500 to a request (a pattern naming
# each exactly), then checks that none is left.
sweep() {
  local gone count
  gone=$(admin --list | left_by_gone_runs)
  count=$(grep -c . <<<"$gone" || true)
  if [ "$count" -eq 0 ]; then log "no topics left by runs that are gone"; return 0; fi
  log "deleting $count topics left by test and benchmark runs that are gone"
  local patterns pattern
  patterns=$(sed 's/\./\\./g' <<<"$gone" | awk '{ line = line (NR % 500 == 1 ? "" : "|") $0 } NR % 500 == 0 { print line; line = "" } END { if (line != "") print line }')
  while IFS= read -r pattern; do
    admin --delete --topic "$pattern" >/dev/null || true
  done <<<"$patterns"
  local left attempt
  for attempt in 1 2 3 4 5; do
    left=$(admin --list | left_by_gone_runs | grep -c . || true)
    [ "$left" -eq 0 ] && break
    sleep 2
  done
  [ "$left" -eq 0 ] || die "$left of those topics are still there (Kafka's log: $DIR/server.log)"
  log "deleted $count topics"
}

# A run's own set of recap's topics: the ones `start` creates, under a prefix. For
# scripts without a Kafka client of their own (the Rust benches and tests create theirs
# with the admin API).
create_run() {
  local prefix=$1 entry
  [[ $prefix =~ ^(t|bench|lagtest)[0-9]+_[A-Za-z0-9_]*\.$ ]] || die "a run's prefix is <kind><pid>_<name>. (see sweep), not '$prefix'"
  for entry in "${TOPICS[@]}"; do
    admin --create --if-not-exists --topic "$prefix${entry%%:*}" --partitions "${entry##*:}" --replication-factor 1 >/dev/null
  done
}

delete_run() {
  local prefix=$1
  [[ $prefix =~ ^(t|bench|lagtest)[0-9]+_[A-Za-z0-9_]*\.$ ]] || die "a run's prefix is <kind><pid>_<name>. (see sweep), not '$prefix'"
  admin --delete --if-exists --topic "${prefix//./\\.}.*" >/dev/null
}

launch() {
  refuse_foreign_ports
  configure
  log "starting Kafka $VERSION (KRaft, broker+controller) on $BIND:$KAFKA_PORT"
  need_java17
  nohup "$JAVA17" -Xms256m -Xmx1g -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
    -XX:+ExplicitGCInvokesConcurrent -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$DIR/log4j2.properties" -Dlog4j.configuration="file:$DIR/log4j.properties" \
    -Dkafka.logs.dir="$DIR" -cp "$HOME_DIR/libs/*" kafka.Kafka "$DIR/server.properties" \
    </dev/null >"$DIR/stdout.log" 2>&1 9>&- &
  echo $! >"$PIDFILE"
}

_start() {
  local started
  started=$(now_ms)
  adopt_or_launch 120 || die "Kafka did not become ready (logs: $DIR)"
  ensure_topics
  log "ready on $BIND:$KAFKA_PORT in $(elapsed "$started") (pid $(engine_pid), RSS $(rss_of_engine))"
}

start() {
  install
  with_lock kafka _start
}

status() {
  local pid
  if ! pid=$(engine_pid); then echo "kafka: down"; return 1; fi
  if engine_paused; then echo "kafka: paused (pid $pid)"; return 1; fi
  if ready 2>/dev/null; then echo "kafka: ready on $BIND:$KAFKA_PORT (pid $pid, RSS $(rss_of_engine))"; else echo "kafka: running but not ready (pid $pid)"; return 1; fi
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) with_lock kafka stop_engine TERM 60 ;;
  restart) with_lock kafka stop_engine TERM 60 && start ;;
  status) status ;;
  kill9) with_lock kafka stop_engine KILL 10 ;;
  pause) pause_engine ;;
  resume) resume_engine ;;
  topics) admin --list ;;
  sweep) sweep ;;
  create-run) create_run "${2:?usage: kafka.sh create-run PREFIX}" ;;
  delete-run) delete_run "${2:?usage: kafka.sh delete-run PREFIX}" ;;
  *) engine_usage ;;
esac
