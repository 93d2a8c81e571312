//! `rotate` (ask the controller for a new generated key, or explain the provider-issued steps)
//! and `secret` (print a generated signing secret: the only place a key value is ever printed).

use super::cluster::{self, Integration, Target};
use super::keys::format_time;
use crate::controller::generated::{ROTATE_ANNOTATION, secret_name as signing_secret_name};
use anyhow::{anyhow, bail};
use chrono::{SubsecRound, Utc};
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;
use serde_json::json;
use std::io::Write;

pub async fn rotate(
    client: &Client,
    target: &Target,
    overlap: Option<&str>,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    if let Some(o) = overlap {
        crate::crd::validate::duration("--overlap", o).map_err(|e| anyhow!("{e}"))?;
    }
    let wi = cluster::get(client, target).await?;
    if !wi.rotation.generate {
        return provider_steps(target, &wi, overlap, out);
    }
    let requested = format_time(Utc::now().trunc_subsecs(0));
    let mut body = json!({"metadata": {"annotations": {ROTATE_ANNOTATION: requested}}});
    if let Some(o) = overlap {
        body["spec"] = json!({"rotation": {"overlap": o}});
    }
    cluster::merge(client, target, &body).await?;
    writeln!(
        out,
        "{}: rotation requested ({ROTATE_ANNOTATION}={requested})",
        target.display()
    )?;
    let overlap = overlap.map_or_else(|| wi.overlap(), str::to_string);
    let previous = wi.active_key().unwrap_or("the active key");
    writeln!(
        out,
        "Next: the controller generates a new key and makes it active; {previous} stays accepted \
         (Retiring) for {overlap}. Give senders the new key before then:"
    )?;
    writeln!(
        out,
        "  kubectl hookgate keys {0}/{1}      # the new key's id\n  \
         kubectl hookgate secret {0}/{1}    # its value",
        target.namespace, target.name
    )?;
    Ok(())
}

/// Provider-issued keys: hookgate cannot make the key, so say how to rotate; change nothing.
fn provider_steps(
    target: &Target,
    wi: &Integration,
    overlap: Option<&str>,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let t = format!("{}/{}", target.namespace, target.name);
    let ids = wi.key_ids();
    let new_id = next_id(ids.last().copied());
    let old = wi
        .active_key()
        .or(ids.last().copied())
        .unwrap_or("<old-id>");
    let overlap_now = overlap.map_or_else(|| wi.overlap(), str::to_string);
    let mut text = format!(
        "{} uses provider-issued keys (spec.rotation.generate is not set): hookgate cannot \
         create the new key, and nothing was changed. To rotate:\n\
         1. Create a new signing secret at the provider (keep the old one valid there) and save \
         it to a file.\n\
         2. kubectl hookgate add-key {t} --id {new_id} --from-file <file>\n   \
         {new_id} becomes the active key; {old} stays accepted (Retiring) for {overlap_now}.\n\
         3. Switch the provider to the new secret. Once `kubectl hookgate keys {t}` shows {old} \
         no longer used, you may retire it early: kubectl hookgate retire {t} {old}\n",
        target.display()
    );
    if let Some(o) = overlap {
        text.push_str(&format!(
            "--overlap was not applied; to set it: kubectl patch webhookintegration {} -n {} \
             --type merge -p '{{\"spec\":{{\"rotation\":{{\"overlap\":\"{o}\"}}}}}}'\n",
            target.name, target.namespace
        ));
    }
    out.write_all(text.as_bytes())?;
    Ok(())
}

/// `v2` -> `v3`; anything without a trailing number -> `<new-id>`.
fn next_id(last: Option<&str>) -> String {
    let Some(last) = last else {
        return "<new-id>".into();
    };
    let digits = last.len() - last.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (stem, n) = last.split_at(last.len() - digits);
    match n.parse::<u64>() {
        Ok(n) if digits <= 18 => format!("{stem}{}", n + 1),
        _ => "<new-id>".into(),
    }
}

pub async fn secret(
    client: &Client,
    target: &Target,
    key: Option<&str>,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let wi = cluster::get(client, target).await?;
    if !wi.rotation.generate {
        bail!(
            "{} uses provider-issued keys (spec.rotation.generate is not set): its signing secret \
             comes from the provider, and hookgate has none to show",
            target.display()
        );
    }
    let id = match key {
        Some(k) => k.to_string(),
        None => wi.active_key().map(str::to_string).ok_or_else(|| {
            anyhow!(
                "{} has no Active key in status yet (the controller has not generated one); \
                 pass --key",
                target.display()
            )
        })?,
    };
    let name = signing_secret_name(&target.name);
    let what = target.secret_display(&name);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &target.namespace);
    let secret = secrets
        .get(&name)
        .await
        .map_err(|e| cluster::api_error(e, &what))?;
    let data = crate::route::secret_values(secret);
    let Some(value) = data.get(&id) else {
        let ids: Vec<&str> = data.keys().map(String::as_str).collect();
        bail!("key {id:?} not in {what} {}", cluster::id_list(&ids));
    };
    out.write_all(value)?;
    out.write_all(b"\n")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::next_id;

    #[test]
    fn next_id_counts_up_a_trailing_number() {
        assert_eq!(next_id(Some("v2")), "v3");
        assert_eq!(next_id(Some("key-09")), "key-10");
        assert_eq!(next_id(Some("2026")), "2027");
        assert_eq!(next_id(Some("primary")), "<new-id>");
        assert_eq!(next_id(None), "<new-id>");
    }
}
