//! Plans and features: which tiers include the REST API and MCP. Configurable; the
//! default is the one docs/events.md describes: `flow` includes both,
//! `enterprise` the REST API only, any other tier neither.

use std::collections::BTreeMap;

use recap_readmodel::AccountRecord;
use recap_schemas::Plan;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Feature {
    PublicApi,
    Mcp,
}

impl Feature {
    /// The value of the error envelope's `feature` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Feature::PublicApi => "public_api",
            Feature::Mcp => "mcp",
        }
    }

    pub fn parse(text: &str) -> Option<Feature> {
        match text {
            "public_api" => Some(Feature::PublicApi),
            "mcp" => Some(Feature::Mcp),
            _ => None,
        }
    }
}

/// Plan settings of the REST and MCP roles.
#[derive(clap::Args, Clone, Debug)]
pub struct PlanConfig {
    /// Which plan tiers include which features: `tier=feature+feature,...`
    /// (features: public_api, mcp).
    #[arg(long, env = "RECAP_PLAN_FEATURES", default_value = "flow=public_api+mcp,enterprise=public_api")]
    pub plan_features: String,
    /// Requests per billing period when the account's plan gives no `api_quota`.
    #[arg(long, env = "RECAP_DEFAULT_API_QUOTA", default_value_t = 50_000)]
    pub default_api_quota: u64,
}

impl Default for PlanConfig {
    fn default() -> Self {
        PlanConfig { plan_features: "flow=public_api+mcp,enterprise=public_api".into(), default_api_quota: 50_000 }
    }
}

/// The tier → features map.
#[derive(Clone, Debug)]
pub struct Plans {
    features: BTreeMap<String, Vec<Feature>>,
    default_api_quota: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("the account has no active plan")]
    NoPlan,
    #[error("the plan does not include {}", .0.as_str())]
    FeatureNotIncluded(Feature),
}

impl Plans {
    pub fn from_config(config: &PlanConfig) -> Result<Plans, String> {
        let mut features = BTreeMap::new();
        for entry in config.plan_features.split(',').map(str::trim).filter(|entry| !entry.is_empty()) {
            let (tier, list) = entry.split_once('=').ok_or_else(|| format!("plan features entry {entry:?} is not tier=feature+feature"))?;
            let mut included = Vec::new();
            for name in list.split('+').map(str::trim).filter(|name| !name.is_empty()) {
                included.push(Feature::parse(name).ok_or_else(|| format!("unknown feature {name:?} (known: public_api, mcp)"))?);
            }
            features.insert(tier.trim().to_string(), included);
        }
        Ok(Plans { features, default_api_quota: config.default_api_quota })
    }

    pub fn includes(&self, tier: &str, feature: Feature) -> bool {
        self.features.get(tier).is_some_and(|included| included.contains(&feature))
    }

    /// The period quota of a plan: its `api_quota`, else the default.
    pub fn quota(&self, plan: &Plan) -> u64 {
        plan.api_quota.unwrap_or(self.default_api_quota)
    }
}

impl Default for Plans {
    fn default() -> Self {
        Plans::from_config(&PlanConfig::default()).unwrap_or(Plans { features: BTreeMap::new(), default_api_quota: 50_000 })
    }
}

/// The plan, when it covers `feature`.
pub fn check_plan<'a>(plans: &Plans, account: &'a AccountRecord, feature: Feature) -> Result<&'a Plan, PlanError> {
    let plan = account.plan.as_ref().ok_or(PlanError::NoPlan)?;
    if !plans.includes(&plan.tier, feature) {
        return Err(PlanError::FeatureNotIncluded(feature));
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use recap_schemas::Timestamp;

    fn account(tier: Option<&str>) -> AccountRecord {
        AccountRecord { plan: tier.map(|tier| Plan { tier: tier.into(), api_quota: None, billing_cycle_anchor: Timestamp(0) }) }
    }

    #[test]
    fn default_tiers_follow_the_spec() {
        let plans = Plans::default();
        assert!(check_plan(&plans, &account(Some("flow")), Feature::PublicApi).is_ok());
        assert!(check_plan(&plans, &account(Some("flow")), Feature::Mcp).is_ok());
        assert!(check_plan(&plans, &account(Some("enterprise")), Feature::PublicApi).is_ok());
        assert_eq!(check_plan(&plans, &account(Some("enterprise")), Feature::Mcp), Err(PlanError::FeatureNotIncluded(Feature::Mcp)));
        assert_eq!(check_plan(&plans, &account(Some("basic")), Feature::PublicApi), Err(PlanError::FeatureNotIncluded(Feature::PublicApi)));
        assert_eq!(check_plan(&plans, &account(None), Feature::PublicApi), Err(PlanError::NoPlan));
    }
}
