//! Separate name spaces for plain leases, lease locks and elections in one lease table.
//!
//! Plain leases ([`LeaseClient`](crate::LeaseClient)), lease locks
//! ([`LeaseLock`](crate::lock::LeaseLock)) and elections (`cql_election`) keep their leases in
//! the same table, so each stores its rows under its own prefix: a lease `X` is the row `X`,
//! a lease lock `X` the row `lock/X`, an election `X` the row `election/X`. The three never
//! meet: taking the lease `X` does not make anyone leader of the election `X`, and the lock
//! `X` and the election `X` can be held at once.
//!
//! Everything a user sees (a lease's or guard's `name()`, leader events, errors, log fields)
//! names what the user gave; only the store's rows carry the prefix. A plain lease name may
//! not start with a reserved prefix ([`LOCK_PREFIX`], [`ELECTION_PREFIX`]): it is refused with
//! [`InvalidArgument::ReservedPrefix`] before anything is written. Lock and election names
//! may be any valid name, e.g. an election `lock/a` is the row `election/lock/a`.
//!
//! Names are limited to [`MAX_NAME_LEN`] bytes in every name space; the stored row name is
//! then at most [`MAX_STORED_NAME_LEN`] bytes.
//!
//! ```
//! use cql_lease::namespace::Namespace;
//!
//! assert_eq!(Namespace::Lease.stored_name("jobs"), "jobs");
//! assert_eq!(Namespace::Lock.stored_name("jobs"), "lock/jobs");
//! assert_eq!(Namespace::Election.stored_name("jobs"), "election/jobs");
//! assert_eq!(Namespace::of_stored("election/jobs"), (Namespace::Election, "jobs"));
//! assert!(Namespace::Lease.check_name("lock/jobs").is_err());
//! assert!(Namespace::Election.check_name("lock/jobs").is_ok());
//! ```

use std::borrow::Cow;

use crate::config::{MAX_NAME_LEN, check_text};
use crate::error::InvalidArgument;

/// The prefix of a lease lock's row: the lock `X` is stored as `lock/X`.
pub const LOCK_PREFIX: &str = "lock/";
/// The prefix of an election's row: the election `X` is stored as `election/X`.
pub const ELECTION_PREFIX: &str = "election/";
/// The longest stored row name: a name of [`MAX_NAME_LEN`] bytes under the longest prefix.
pub const MAX_STORED_NAME_LEN: usize = MAX_NAME_LEN + ELECTION_PREFIX.len();

/// Which kind of lease a name belongs to, and so which prefix its row carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Namespace {
    /// Plain leases: the row is the name itself, which may not start with a reserved prefix.
    #[default]
    Lease,
    /// Lease locks: the row is [`LOCK_PREFIX`] followed by the name.
    Lock,
    /// Elections: the row is [`ELECTION_PREFIX`] followed by the name.
    Election,
}

impl Namespace {
    /// The prefix of this name space's rows (empty for plain leases).
    pub const fn prefix(self) -> &'static str {
        match self {
            Namespace::Lease => "",
            Namespace::Lock => LOCK_PREFIX,
            Namespace::Election => ELECTION_PREFIX,
        }
    }

    /// What a name is called in messages: `lease name`, `lock name`, `election name`.
    pub const fn field(self) -> &'static str {
        match self {
            Namespace::Lease => "lease name",
            Namespace::Lock => "lock name",
            Namespace::Election => "election name",
        }
    }

    /// The row name under which `name` is stored. Does not check `name`; see
    /// [`Namespace::check_name`].
    pub fn stored_name(self, name: &str) -> Cow<'_, str> {
        match self {
            Namespace::Lease => Cow::Borrowed(name),
            _ => Cow::Owned(format!("{}{name}", self.prefix())),
        }
    }

    /// Which name space a stored row belongs to, and the name its user gave (for tools that
    /// list rows, e.g. dashboards).
    pub fn of_stored(stored: &str) -> (Namespace, &str) {
        for namespace in [Namespace::Election, Namespace::Lock] {
            if let Some(name) = stored.strip_prefix(namespace.prefix()) {
                return (namespace, name);
            }
        }
        (Namespace::Lease, stored)
    }

    /// Checks a name given by a user in this name space: not empty, at most
    /// [`MAX_NAME_LEN`] bytes, no control characters, and, for a plain lease, not starting
    /// with a reserved prefix.
    ///
    /// # Errors
    /// [`InvalidArgument`] naming the field (`lease name`, `lock name`, `election name`);
    /// [`InvalidArgument::ReservedPrefix`] for a plain lease name such as `lock/x`.
    pub fn check_name(self, name: &str) -> Result<(), InvalidArgument> {
        check_text(self.field(), name, MAX_NAME_LEN)?;
        if self == Namespace::Lease
            && let (owner @ (Namespace::Lock | Namespace::Election), _) = Namespace::of_stored(name)
        {
            return Err(InvalidArgument::ReservedPrefix {
                name: name.to_owned(),
                prefix: owner.prefix(),
                used_by: match owner {
                    Namespace::Lock => "lease locks",
                    _ => "elections",
                },
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_space_stores_under_its_own_prefix() {
        assert_eq!(Namespace::Lease.stored_name("x"), "x");
        assert_eq!(Namespace::Lock.stored_name("x"), "lock/x");
        assert_eq!(Namespace::Election.stored_name("x"), "election/x");
        for namespace in [Namespace::Lease, Namespace::Lock, Namespace::Election] {
            let stored = namespace.stored_name("a/b");
            assert_eq!(Namespace::of_stored(&stored), (namespace, "a/b"));
        }
    }

    #[test]
    fn plain_lease_names_with_a_reserved_prefix_are_refused() {
        for name in ["lock/x", "election/x", "lock/", "election/"] {
            assert!(
                matches!(
                    Namespace::Lease.check_name(name),
                    Err(InvalidArgument::ReservedPrefix { .. })
                ),
                "{name}"
            );
            assert!(Namespace::Lock.check_name(name).is_ok(), "{name}");
            assert!(Namespace::Election.check_name(name).is_ok(), "{name}");
        }
        for name in ["locks/x", "lock", "elections", "x/lock/y"] {
            assert!(Namespace::Lease.check_name(name).is_ok(), "{name}");
        }
        let message = Namespace::Lease
            .check_name("election/x")
            .map_err(|e| e.to_string());
        assert_eq!(
            message,
            Err(
                "lease name \"election/x\" starts with \"election/\", which is reserved \
                 (elections store their leases under it)"
                    .into()
            )
        );
    }

    #[test]
    fn the_name_limit_is_the_users_and_the_row_has_room_for_the_prefix() {
        let longest = "n".repeat(MAX_NAME_LEN);
        for namespace in [Namespace::Lease, Namespace::Lock, Namespace::Election] {
            assert!(namespace.check_name(&longest).is_ok());
            assert!(namespace.stored_name(&longest).len() <= MAX_STORED_NAME_LEN);
            assert_eq!(
                namespace.check_name(&format!("{longest}n")),
                Err(InvalidArgument::TooLong {
                    field: namespace.field(),
                    len: MAX_NAME_LEN + 1,
                    max: MAX_NAME_LEN
                })
            );
        }
    }
}
