//! The deployment files, validated offline: `scripts/k8s-validate.sh` (helm lint, helm
//! template with the default and production values, kubeconform -strict against the
//! Kubernetes JSON schemas on disk, kube-score, the metric names of the dashboard and the
//! alerts) must pass, and the rendered chart must keep the properties production relies
//! on: hardened, probed, bounded pods that drain; the migration as a pre-install and
//! pre-upgrade hook; secrets referenced, never inlined; projectors never above the
//! partition count; both front doors behind one host.
//!
//! The tools are pinned and cached under ~/.cache/recap by `scripts/k8s-tools.sh` (a
//! first run compiles helm, kubeconform and kube-score with `go install`, which takes
//! minutes).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn repo() -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap())
}

/// Runs the validation script once per test binary; the directory of its renderings.
fn validated() -> &'static Path {
    static OUT: OnceLock<PathBuf> = OnceLock::new();
    OUT.get_or_init(|| {
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("k8s-validate");
        let _ = std::fs::remove_dir_all(&out);
        let output = Command::new("bash").arg(repo().join("scripts/k8s-validate.sh")).env("RECAP_K8S_OUT", &out).output().expect("run scripts/k8s-validate.sh");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        eprintln!("{stdout}");
        assert!(output.status.success(), "scripts/k8s-validate.sh failed:\n{stdout}\n{stderr}");
        assert!(stdout.contains("k8s-validate: ok"), "the script did not finish:\n{stdout}");
        out
    })
}

fn helm() -> PathBuf {
    let output = Command::new("bash").arg(repo().join("scripts/k8s-tools.sh")).output().expect("run scripts/k8s-tools.sh");
    assert!(output.status.success(), "scripts/k8s-tools.sh failed: {}", String::from_utf8_lossy(&output.stderr));
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()).join("helm")
}

/// `helm template` with extra arguments: (success, stdout, stderr).
fn render(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(helm())
        .args(["template", "recap"])
        .arg(repo().join("k8s/recap"))
        .args(["--kube-version", "1.30.0"])
        .args(args)
        .env("HELM_CACHE_HOME", PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("helm-cache"))
        .env("HELM_CONFIG_HOME", PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("helm-config"))
        .output()
        .expect("run helm");
    (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}

fn rendering(values: &str) -> String {
    let path = validated().join(format!("{values}-1.37.0.yaml"));
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// The rendered objects as (kind, name, text); helm separates them with `---` lines.
fn objects(rendered: &str) -> Vec<(String, String, String)> {
    rendered
        .split("\n---\n")
        .filter_map(|document| {
            let field = |prefix: &str| document.lines().find_map(|line| line.strip_prefix(prefix)).map(|value| value.trim().to_string());
            Some((field("kind: ")?, field("  name: ")?, document.to_string()))
        })
        .collect()
}

fn of_kind<'a>(objects: &'a [(String, String, String)], kind: &str) -> Vec<&'a (String, String, String)> {
    objects.iter().filter(|(object_kind, _, _)| object_kind == kind).collect()
}

#[test]
fn validation_script_passes_offline() {
    let out = validated();
    for file in ["default-1.30.0.yaml", "default-1.37.0.yaml", "production-1.30.0.yaml", "production-1.37.0.yaml"] {
        assert!(out.join(file).is_file(), "{file} was not rendered");
    }
}

#[test]
fn every_deployment_is_hardened_probed_bounded_and_drains() {
    for values in ["default", "production"] {
        let objects = objects(&rendering(values));
        let deployments = of_kind(&objects, "Deployment");
        let names: Vec<&str> = deployments.iter().map(|(_, name, _)| name.as_str()).collect();
        assert_eq!(names.len(), 4, "{values}: projector, query-api, mcp and webhooks, got {names:?}");
        for (_, name, text) in deployments {
            for needed in [
                "readOnlyRootFilesystem: true",
                "allowPrivilegeEscalation: false",
                "runAsNonRoot: true",
                "- ALL",
                "type: RuntimeDefault",
                "automountServiceAccountToken: false",
                "livenessProbe:",
                "path: /livez",
                "readinessProbe:",
                "path: /readyz",
                "port: admin",
                "requests:",
                "limits:",
                "memory:",
                "cpu:",
                "terminationGracePeriodSeconds: 30",
                "preStop:",
                "topologySpreadConstraints:",
                "podAntiAffinity:",
            ] {
                assert!(text.contains(needed), "{values}: Deployment {name} lacks `{needed}`");
            }
            assert!(!text.contains("privileged: true"), "{values}: Deployment {name} is privileged");
        }
        // The admin listener must be reachable by the kubelet's probes.
        let config = of_kind(&objects, "ConfigMap");
        assert!(config.iter().any(|(_, _, text)| text.contains("RECAP_ADMIN_LISTEN: \"0.0.0.0:9464\"")), "{values}: admin listener not on 0.0.0.0:9464");
        for role in ["query-api", "mcp", "webhooks"] {
            let hpa = of_kind(&objects, "HorizontalPodAutoscaler").into_iter().any(|(_, name, _)| name.ends_with(role));
            assert!(hpa, "{values}: no HorizontalPodAutoscaler for {role}");
        }
        assert_eq!(of_kind(&objects, "PodDisruptionBudget").len(), 4, "{values}: one PodDisruptionBudget per role");
    }
}

#[test]
fn migrate_runs_as_a_pre_install_and_pre_upgrade_hook() {
    let objects = objects(&rendering("default"));
    let jobs = of_kind(&objects, "Job");
    assert_eq!(jobs.len(), 1, "one Job");
    let (_, name, text) = jobs[0];
    assert!(name.ends_with("-migrate"), "{name}");
    assert!(text.contains("helm.sh/hook: pre-install,pre-upgrade"), "{text}");
    assert!(text.contains("helm.sh/hook-weight:"), "{text}");
    assert!(text.contains("helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded"), "{text}");
    assert!(text.contains("args: [migrate]"), "{text}");
    assert!(text.contains("RECAP_SCYLLA_REPLICATION"), "{text}");
    assert!(text.contains("readOnlyRootFilesystem: true"), "{text}");
    // Hooks run before the release's other objects exist: the Job may not need them.
    assert!(!text.contains("configMapRef"), "the migrate hook must not read the release's ConfigMap: {text}");
    let service_account = text.lines().find_map(|line| line.trim().strip_prefix("serviceAccountName: ")).expect("serviceAccountName");
    let hook_account = of_kind(&objects, "ServiceAccount").into_iter().find(|(_, name, _)| name == service_account).expect("the Job's ServiceAccount");
    assert!(hook_account.2.contains("helm.sh/hook: pre-install,pre-upgrade"), "the Job's ServiceAccount must exist when the hook runs");
}

#[test]
fn projector_replicas_above_partitions_fail_to_render() {
    let (ok, _, stderr) = render(&["--set", "kafka.partitions=4", "--set", "projector.replicas=5"]);
    assert!(!ok, "5 projectors over 4 partitions rendered");
    assert!(stderr.contains("projector.replicas (5) must not exceed kafka.partitions (4)"), "{stderr}");
    let (ok, _, stderr) = render(&["--set", "kafka.partitions=4", "--set", "projector.replicas=4"]);
    assert!(ok, "4 projectors over 4 partitions must render: {stderr}");
}

#[test]
fn webhooks_replicas_above_the_message_partitions_fail_to_render() {
    let (ok, _, stderr) = render(&["--set", "kafka.messagePartitions=4", "--set", "webhooks.autoscaling.maxReplicas=5"]);
    assert!(!ok, "an HPA up to 5 webhooks pods over 4 partitions rendered");
    assert!(stderr.contains("webhooks replicas (up to 5) must not exceed kafka.messagePartitions (4)"), "{stderr}");
    let (ok, _, stderr) = render(&["--set", "kafka.messagePartitions=4", "--set", "webhooks.autoscaling.enabled=false", "--set", "webhooks.replicas=5"]);
    assert!(!ok, "5 webhooks pods over 4 partitions rendered");
    assert!(stderr.contains("webhooks replicas (up to 5) must not exceed kafka.messagePartitions (4)"), "{stderr}");
    let (ok, _, stderr) = render(&["--set", "kafka.messagePartitions=4", "--set", "webhooks.autoscaling.maxReplicas=4"]);
    assert!(ok, "an HPA up to 4 webhooks pods over 4 partitions must render: {stderr}");
}

#[test]
fn the_chart_never_allows_insecure_webhook_targets() {
    for values in ["default", "production"] {
        let rendered = rendering(values);
        assert!(!rendered.contains("RECAP_WEBHOOKS_ALLOW_INSECURE") && !rendered.contains("--webhooks-allow-insecure"), "{values}: insecure targets allowed");
        assert!(rendered.contains("RECAP_FEED_RETENTION: \"30d\""), "{values}: the feed retention is configured once for every role");
    }
}

#[test]
fn every_http_limit_of_the_command_line_is_set_by_the_chart() {
    // Each `RECAP_HTTP_*` variable the roles read (docs/configuration.md is generated from
    // the command line) is in the ConfigMap every role loads, so `http.*` values reach them.
    let configuration = std::fs::read_to_string(repo().join("docs/configuration.md")).expect("docs/configuration.md");
    let mut variables: Vec<&str> =
        configuration.split('`').filter(|word| word.starts_with("RECAP_HTTP_") && word.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')).collect();
    variables.sort_unstable();
    variables.dedup();
    assert!(variables.contains(&"RECAP_HTTP_SEND_TIMEOUT_MS") && variables.len() == 5, "{variables:?}");
    for values in ["default", "production"] {
        let objects = objects(&rendering(values));
        let config = of_kind(&objects, "ConfigMap");
        for variable in &variables {
            assert!(config.iter().any(|(_, _, text)| text.contains(&format!("{variable}: \""))), "{values}: the chart does not set {variable}");
        }
    }
    let objects = objects(&rendering("default"));
    assert!(of_kind(&objects, "ConfigMap").iter().any(|(_, _, text)| text.contains("RECAP_HTTP_SEND_TIMEOUT_MS: \"30000\"")), "the flag's default");
}

#[test]
fn secrets_are_referenced_never_inlined() {
    for values in ["default", "production"] {
        let rendered = rendering(values);
        let objects = objects(&rendered);
        assert!(of_kind(&objects, "Secret").is_empty(), "{values}: the chart renders no Secret");
        for role in ["query-api", "mcp"] {
            let deployment = of_kind(&objects, "Deployment").into_iter().find(|(_, name, _)| name.ends_with(role)).expect(role);
            let cursor = deployment.2.split("- name: RECAP_CURSOR_SECRET").nth(1).unwrap_or_else(|| panic!("{values}: {role} has RECAP_CURSOR_SECRET"));
            assert!(cursor.trim_start().starts_with("valueFrom:\n") && cursor.contains("secretKeyRef:"), "{values}: {role}'s cursor key not from a Secret");
        }
    }
    let production = rendering("production");
    assert!(production.contains("value: \"redis://:$(RECAP_REDIS_PASSWORD)@redis-master"), "the Redis password is composed from its Secret");
    assert!(!production.contains("RECAP_REDIS_URL: "), "no Redis URL in the ConfigMap when a Secret holds the password");
    let (ok, _, stderr) = render(&["--set", "redis.url=redis://:hunter2@redis:6379"]);
    assert!(!ok && stderr.contains("redis.url embeds credentials"), "{stderr}");
    let production_objects = objects(&production);
    for role in of_kind(&production_objects, "Deployment").into_iter().chain(of_kind(&production_objects, "Job")) {
        let password = role.2.split("- name: RECAP_SCYLLA_PASSWORD").nth(1).unwrap_or_else(|| panic!("{}: RECAP_SCYLLA_PASSWORD", role.1));
        assert!(
            password.trim_start().starts_with("valueFrom:\n") && password.contains("name: recap-scylla-login"),
            "{}: the store's password from its Secret",
            role.1
        );
        assert!(role.2.contains("secretName: recap-scylla-client-tls") && role.2.contains("mountPath: /etc/recap/scylla-tls"), "{}: TLS files mounted", role.1);
        assert!(role.2.contains("value: /etc/recap/scylla-tls/client.key"), "{}: the client key's path", role.1);
    }
    let (ok, _, stderr) = render(&["-f", &repo().join("k8s/recap/values-production.yaml").to_string_lossy(), "--set", "scylla.tls.keyKey="]);
    assert!(!ok && stderr.contains("scylla.tls.certKey and scylla.tls.keyKey go together"), "{stderr}");
    let (ok, _, stderr) = render(&["--set", "cursorSecret.existingSecret="]);
    assert!(!ok && stderr.contains("cursorSecret.existingSecret is required"), "{stderr}");
}

// docs/operations.md, RecapWebhooksAbsent: the chart installs the webhooks role's alerts
// where the role runs, and leaves their group out where it does not (the absence alert
// would fire there for good).
#[test]
fn the_webhooks_alerts_are_installed_only_with_the_webhooks_role() {
    let rules = repo().join("k8s/alerts/recap-rules.yaml");
    let rules = rules.to_string_lossy();
    let with_rules = ["--set", "metrics.prometheusRule.enabled=true", "--set-file"];
    let (ok, deployed, stderr) = render(&[&with_rules[..], &[&format!("metrics.prometheusRule.rules={rules}")]].concat());
    assert!(ok, "{stderr}");
    assert!(deployed.contains("- name: recap.webhooks") && deployed.contains("alert: RecapWebhooksAbsent"), "the webhooks group is installed");
    let (ok, without, stderr) = render(&[&with_rules[..], &[&format!("metrics.prometheusRule.rules={rules}"), "--set", "webhooks.enabled=false"]].concat());
    assert!(ok, "{stderr}");
    assert!(!without.contains("recap.webhooks") && !without.contains("RecapWebhooks"), "no webhooks rule without the role");
    assert!(without.contains("alert: RecapProjectorAbsent"), "the other groups stay");
}

#[test]
fn one_host_routes_both_front_doors() {
    let objects = objects(&rendering("production"));
    let ingresses = of_kind(&objects, "Ingress");
    assert_eq!(ingresses.len(), 1);
    let text = &ingresses[0].2;
    assert!(text.contains("secretName: recap-api-tls"), "TLS: {text}");
    let routes: Vec<(String, String, String)> = text
        .split("- path: ")
        .skip(1)
        .map(|route| {
            let path = route.lines().next().unwrap_or_default().trim().to_string();
            let field = |prefix: &str| route.lines().find_map(|line| line.trim().strip_prefix(prefix)).unwrap_or_default().to_string();
            (path, field("pathType: "), field("name: "))
        })
        .collect();
    let expected = [
        ("/v1", "Prefix", "recap-query-api"),
        ("/mcp", "Prefix", "recap-mcp"),
        ("/.well-known/oauth-protected-resource", "Prefix", "recap-mcp"),
        ("/.well-known/oauth-authorization-server", "Prefix", "recap-mcp"),
        ("/register", "Exact", "recap-mcp"),
        ("/authorize", "Exact", "recap-mcp"),
        ("/token", "Exact", "recap-mcp"),
        ("/revoke", "Exact", "recap-mcp"),
    ];
    let got: Vec<(&str, &str, &str)> = routes.iter().map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str())).collect();
    assert_eq!(got, expected);
    let config = of_kind(&objects, "ConfigMap");
    assert!(config[0].2.contains("RECAP_MCP_PUBLIC_URL: \"https://api.recap.example.com/mcp\""), "mcp_url pinned to the public host");
}

/// Every key of values.yaml has a row in the chart README's table, except inside the
/// blocks that are passed through to Kubernetes as they are (resources, affinity, ...).
#[test]
fn every_value_is_documented() {
    let values = std::fs::read_to_string(repo().join("k8s/recap/values.yaml")).expect("values.yaml");
    let readme = std::fs::read_to_string(repo().join("k8s/recap/README.md")).expect("README.md");
    let pass_through = [
        "resources",
        "strategy",
        "affinity",
        "behavior",
        "podSecurityContext",
        "containerSecurityContext",
        "nodeSelector",
        "tolerations",
        "podAnnotations",
        "podLabels",
        "annotations",
        "labels",
        "commonLabels",
        "egress",
        "topologySpreadConstraints",
    ];
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut missing = Vec::new();
    for line in values.lines() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('-') {
            continue;
        }
        let Some((key, _)) = trimmed.split_once(':') else { continue };
        if !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            continue;
        }
        let indent = line.len() - trimmed.len();
        while stack.last().is_some_and(|(depth, _)| *depth >= indent) {
            stack.pop();
        }
        if stack.iter().any(|(_, parent)| pass_through.contains(&parent.as_str())) {
            continue;
        }
        let path = stack.iter().map(|(_, key)| key.as_str()).chain([key]).collect::<Vec<_>>().join(".");
        let is_section = trimmed.trim_end().ends_with(':');
        stack.push((indent, key.to_string()));
        if is_section && !pass_through.contains(&key) {
            continue;
        }
        if !readme.contains(&format!("| `{path}` |")) {
            missing.push(path);
        }
    }
    assert!(missing.is_empty(), "values without a row in k8s/recap/README.md: {missing:?}");
}

#[test]
fn the_image_builds_locked_and_runs_the_binary_as_non_root() {
    let dockerfile = std::fs::read_to_string(repo().join("Dockerfile")).expect("Dockerfile");
    for needed in [
        "-bookworm AS build",
        "--no-install-recommends cmake pkg-config",
        "cargo build --release --locked --bin recap",
        "USER 65532:65532",
        "ENTRYPOINT [\"/usr/local/bin/recap\"]",
    ] {
        assert!(dockerfile.contains(needed), "Dockerfile lacks `{needed}`");
    }
    let ignore = std::fs::read_to_string(repo().join(".dockerignore")).expect(".dockerignore");
    for excluded in ["target", ".git"] {
        assert!(ignore.lines().any(|line| line.trim() == excluded), ".dockerignore must exclude {excluded}");
    }
    // Everything the build reads must be in the context.
    for member in ["src", "schemas", "readmodel", "access", "projector", "query-api", "mcp", "webhooks", "benches", "Cargo.lock"] {
        assert!(!ignore.lines().any(|line| line.trim() == member), ".dockerignore excludes {member}, which the build needs");
    }
}
