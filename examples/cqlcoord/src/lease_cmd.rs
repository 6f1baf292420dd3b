//! `lease get | acquire | release`: inspection and repair.
//!
//! The names are plain leases' unless `--of lock` or `--of election` says otherwise (see
//! [`cql_lease::namespace`]): `lease acquire X` does not touch the election `X`.

use std::time::Duration;

use cql_lease::namespace::Namespace;
use cql_lease::{
    CasOutcome, LeaseClient, MAX_TTL_SECS, MIN_RENEW_DEADLINE, StoredLease, Timing, TryAcquire,
};
use serde_json::json;

use crate::cli::{Connection, LeaseCommand};
use crate::error::CliError;

/// Runs a `lease` command.
///
/// # Errors
/// Bad flags (2), store failures (1), a lease held by someone else (124).
pub async fn run(connection: &Connection, command: LeaseCommand) -> Result<i32, CliError> {
    // Flags are checked before connecting: a bad one sends nothing.
    if let LeaseCommand::Acquire { ttl, .. } = &command {
        acquire_timing(*ttl)?;
    }
    let store = crate::stores::leases(connection).await?;
    match command {
        LeaseCommand::Get { name, of, json } => {
            let client = LeaseClient::new(store, Timing::default())?.in_namespace(of.into());
            print_holder(&name, client.holder(&name).await?.as_ref(), json);
            Ok(0)
        }
        LeaseCommand::Acquire {
            name,
            owner,
            value,
            ttl,
            wait,
            json,
        } => {
            let config = acquire_timing(ttl)?;
            let client = LeaseClient::new(store, config)?;
            let lease = match wait {
                Some(wait) => {
                    client
                        .acquire(&name, &owner, value.as_deref(), Some(wait))
                        .await?
                }
                None => match client.try_acquire(&name, &owner, value.as_deref()).await? {
                    TryAcquire::Acquired(lease) => lease,
                    TryAcquire::Held(holder) => {
                        print_holder(&name, Some(&holder), json);
                        return Err(CliError::not_obtained(format!(
                            "lease {name:?} is held by {:?} (token {})",
                            holder.owner, holder.token
                        )));
                    }
                },
            };
            // Not renewed: it stays held until its TTL runs out, or `lease release`.
            if json {
                println!(
                    "{}",
                    json!({"name": name, "owner": owner, "holder": lease.holder_id(),
                           "token": lease.token().get(), "ttl_secs": config.store_ttl().as_secs()})
                );
            } else {
                println!(
                    "acquired {name} token={} holder={} ttl={}s",
                    lease.token(),
                    lease.holder_id(),
                    config.store_ttl().as_secs()
                );
            }
            Ok(0)
        }
        LeaseCommand::Release { name, of, holder } => {
            let namespace = Namespace::from(of);
            namespace.check_name(&name)?;
            let key = namespace.stored_name(&name);
            // A repair tool: release whoever holds it now, or only the given holder. The
            // release is conditional on that holder id, so a claim made meanwhile survives.
            let holder_id = match holder {
                Some(id) => id,
                None => match store.read(&key).await.map_err(CliError::store)? {
                    Some(current) => current.holder_id,
                    None => {
                        println!("{name} is free");
                        return Ok(0);
                    }
                },
            };
            match store
                .release(&key, &holder_id)
                .await
                .map_err(|e| CliError::store(format!("release of {name:?}: {e}")))?
            {
                CasOutcome::Applied => {
                    println!("released {name} (holder {holder_id})");
                    Ok(0)
                }
                CasOutcome::NotApplied => Err(CliError::not_obtained(format!(
                    "{holder_id} does not hold {name:?}; nothing released"
                ))),
            }
        }
    }
}

/// The timing of `lease acquire --ttl TTL`. The lease is not renewed, but the timing must
/// still validate: the renew period is derived (a quarter of the TTL, at most half the renew
/// deadline), so only `--ttl` can be wrong, and the error names it.
///
/// # Errors
/// A `--ttl` too short for a usable renew deadline, or too long (exit 2).
fn acquire_timing(ttl: Duration) -> Result<Timing, CliError> {
    let mut config = Timing {
        lease_duration: ttl,
        ..Timing::default()
    };
    config.renew_period = (ttl / 4).min(config.renew_deadline() / 2);
    // With the renew period derived, only the TTL can be out of range: the library's message
    // would name fields the command has no flags for.
    config.validate().map_err(|_| {
        CliError::usage(format!(
            "--ttl {} is out of range: it must be at least 1s + the assumed clock skew ({}) + \
             {} and at most {}s",
            humantime::format_duration(ttl),
            humantime::format_duration(config.max_clock_skew),
            humantime::format_duration(MIN_RENEW_DEADLINE),
            MAX_TTL_SECS
        ))
    })?;
    Ok(config)
}

fn print_holder(name: &str, holder: Option<&StoredLease>, json: bool) {
    match (holder, json) {
        (None, false) => println!("{name} is free"),
        (None, true) => println!("{}", json!({"name": name, "held": false})),
        (Some(h), false) => println!(
            "{name} held by owner={} holder={} token={} value={} expires_within={}s",
            h.owner,
            h.holder_id,
            h.token,
            h.value.as_deref().unwrap_or("-"),
            h.expires_within.as_secs()
        ),
        (Some(h), true) => println!(
            "{}",
            json!({"name": name, "held": true, "owner": h.owner, "holder": h.holder_id,
                   "token": h.token.get(), "value": h.value,
                   "expires_within_secs": h.expires_within.as_secs()})
        ),
    }
}
