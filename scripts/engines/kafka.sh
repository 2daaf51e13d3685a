#!/usr/bin/env bash
# Apache Kafka, single-node KRaft (broker + controller), from the broker's jars on Maven
# Central, on 127.0.0.1:9092. Creates recap's topics (3 partitions; dead letters 1).
# usage: kafka.sh install|start|stop|status|kill9
set -euo pipefail
source "$(dirname "$0")/common.sh"
VERSION=${RECAP_KAFKA_VERSION:-3.9.1}
HOME_DIR="$ENGINES_HOME/kafka-$VERSION"; DIR="$RUN_DIR/kafka"; PIDFILE="$DIR/kafka.pid"
CLASSPATH_GLOB="$HOME_DIR/libs/*"

install() {
  resolve_jars "$HOME_DIR" "org.apache.kafka:kafka_2.13:$VERSION" "org.apache.kafka:kafka-tools:$VERSION" "org.slf4j:slf4j-reload4j:1.7.36"
}

kafka_java() { java -Xmx256m -cp "$CLASSPATH_GLOB" -Dlog4j.configuration="file:$DIR/log4j.properties" "$@"; }

ready() { kafka_java org.apache.kafka.tools.TopicCommand --bootstrap-server 127.0.0.1:9092 --list; }

configure() {
  mkdir -p "$DIR/data"
  cat > "$DIR/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:9093
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
advertised.listeners=PLAINTEXT://127.0.0.1:9092
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$DIR/data
num.partitions=3
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
auto.create.topics.enable=false
group.initial.rebalance.delay.ms=0
PROPS
  cat > "$DIR/log4j.properties" <<PROPS
log4j.rootLogger=WARN, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=$DIR/kafka.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
PROPS
  if [ ! -f "$DIR/data/meta.properties" ]; then
    local cluster_id
    cluster_id=$(kafka_java kafka.tools.StorageTool random-uuid)
    kafka_java kafka.tools.StorageTool format -t "$cluster_id" -c "$DIR/server.properties" >&2
  fi
}

ensure_topics() {
  for topic in recap.accounts.v1 recap.meetings.v1 recap.sharing.v1; do
    kafka_java org.apache.kafka.tools.TopicCommand --bootstrap-server 127.0.0.1:9092 --create --if-not-exists --topic "$topic" --partitions 3 --replication-factor 1 >/dev/null
  done
  kafka_java org.apache.kafka.tools.TopicCommand --bootstrap-server 127.0.0.1:9092 --create --if-not-exists --topic recap.deadletter.v1 --partitions 1 --replication-factor 1 >/dev/null
}

start() {
  install
  if pid_alive "$PIDFILE" && ready >/dev/null 2>&1; then ensure_topics; return 0; fi
  configure
  nohup java -Xms256m -Xmx512m -XX:+UseG1GC -cp "$CLASSPATH_GLOB" -Dlog4j.configuration="file:$DIR/log4j.properties" \
    kafka.Kafka "$DIR/server.properties" >"$DIR/stdout.log" 2>&1 &
  echo $! > "$PIDFILE"
  wait_until 90 kafka ready || { tail -n 30 "$DIR/kafka.log" "$DIR/stdout.log" >&2; exit 1; }
  ensure_topics
  log "kafka ready on 127.0.0.1:9092"
}

case "${1:-start}" in
  install) install ;;
  start) start ;;
  stop) stop_pidfile "$PIDFILE" ;;
  status) ready >/dev/null 2>&1 && echo "kafka: ready" || { echo "kafka: down"; exit 1; } ;;
  kill9) stop_pidfile "$PIDFILE" KILL ;;
  *) echo "usage: $0 install|start|stop|status|kill9" >&2; exit 2 ;;
esac
