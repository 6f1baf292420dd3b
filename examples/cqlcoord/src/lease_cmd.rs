//! `lease get | acquire | release`: inspection and repair.
//!
//! The names are plain leases' unless `--of lock` or `--of election` says otherwise (see
//! [`cql_lease::namespace`]): `lease acquire X` does not touch the election `X`.

use cql_lease::namespace::Namespace;
use cql_lease::{CasOutcome, LeaseClient, StoredLease, Timing, TryAcquire};
use serde_json::json;

use crate::cli::{Connection, LeaseCommand};
use crate::error::CliError;

/// Runs a `lease` command.
///
/// # Errors
/// Bad flags (2), store failures (1), a lease held by someone else (124).
pub async fn run(connection: &Connection, command: LeaseCommand) -> Result<i32, CliError> {
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
            let config = Timing {
                lease_duration: ttl,
                renew_period: ttl / 4,
                ..Timing::default()
            };
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
