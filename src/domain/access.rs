//! Who may do what: the three roles, from most to least trusted, and the scopes of API keys.

use super::named_enum;

named_enum!(
    /// A user's role. `admin`: everything; `operator`: job and queue actions and library
    /// scans besides reading; `viewer`: reading and the live feed.
    UserRole, "role" {
        Admin => "admin",
        Operator => "operator",
        Viewer => "viewer",
    }
);

impl UserRole {
    fn rank(self) -> u8 {
        match self {
            UserRole::Viewer => 0,
            UserRole::Operator => 1,
            UserRole::Admin => 2,
        }
    }

    /// Whether this role may do what `needed` may: each role may do all a lesser one may.
    pub fn allows(self, needed: UserRole) -> bool {
        self.rank() >= needed.rank()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_role_allows_itself_and_every_lesser_role_only() {
        use UserRole::{Admin, Operator, Viewer};
        let allowed: Vec<(UserRole, UserRole)> = UserRole::ALL
            .iter()
            .flat_map(|has| UserRole::ALL.iter().map(move |needed| (*has, *needed)))
            .filter(|(has, needed)| has.allows(*needed))
            .collect();
        assert_eq!(
            allowed,
            [
                (Admin, Admin),
                (Admin, Operator),
                (Admin, Viewer),
                (Operator, Operator),
                (Operator, Viewer),
                (Viewer, Viewer)
            ]
        );
    }
}

named_enum!(
    /// What an API key may do, chosen when it is made. A key is its own principal: it acts
    /// within both its scope and its creator's role, never past either (Grafana's service
    /// accounts, GitHub's fine-grained tokens). `integration`: the *arr webhook and reading
    /// jobs; `read`: every read and the feed; `operate`: besides, job and queue actions and
    /// scans; `admin`: everything its creator may do.
    KeyScope, "key scope" {
        Integration => "integration",
        Read => "read",
        Operate => "operate",
        Admin => "admin",
    }
);

/// What a route is to an API key: the route table gives each route one
/// (`http::Endpoint::reach`), and `KeyScope::reaches` says which scopes get there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reach {
    /// Reading jobs: what an *arr application may look at besides its webhook.
    JobReads,
    /// Another read (a GET, or the feed) outside administration.
    Reads,
    /// The *arr webhook: queues the file it names.
    Webhook,
    /// Job and queue actions, library scans and forecasts.
    Actions,
    /// Users, keys, sessions, settings, nodes, the licence, the audit log, libraries,
    /// schedules, notification targets and connections: administration, even to read
    /// (node identities, receivers' URLs and tokens live there).
    Administration,
}

impl Reach {
    pub const ALL: &'static [Reach] =
        &[Reach::JobReads, Reach::Reads, Reach::Webhook, Reach::Actions, Reach::Administration];
}

impl KeyScope {
    /// Whether a key of this scope reaches a route of this kind (its creator's role is
    /// checked as well, separately).
    pub fn reaches(self, reach: Reach) -> bool {
        use KeyScope::{Admin, Integration, Operate, Read};
        match (self, reach) {
            (Admin, _) => true,
            (Operate, Reach::JobReads | Reach::Reads | Reach::Webhook | Reach::Actions) => true,
            (Read, Reach::JobReads | Reach::Reads) => true,
            (Integration, Reach::JobReads | Reach::Webhook) => true,
            (Operate | Read | Integration, _) => false,
        }
    }

    /// The least role that may make a key of this scope: nobody hands out more than they hold.
    pub fn least_role(self) -> UserRole {
        match self {
            KeyScope::Integration | KeyScope::Operate => UserRole::Operator,
            KeyScope::Read => UserRole::Viewer,
            KeyScope::Admin => UserRole::Admin,
        }
    }
}

#[cfg(test)]
mod key_tests {
    use super::*;

    /// Every scope against every kind of route, written out: the table a reviewer reads.
    #[test]
    fn each_scope_reaches_exactly_its_routes() {
        use KeyScope::{Admin, Integration, Operate, Read};
        let expected: &[(KeyScope, &[Reach])] = &[
            (Integration, &[Reach::JobReads, Reach::Webhook]),
            (Read, &[Reach::JobReads, Reach::Reads]),
            (Operate, &[Reach::JobReads, Reach::Reads, Reach::Webhook, Reach::Actions]),
            (Admin, Reach::ALL),
        ];
        for (scope, reached) in expected {
            for reach in Reach::ALL {
                assert_eq!(scope.reaches(*reach), reached.contains(reach), "{scope} -> {reach:?}");
            }
        }
        assert_eq!(expected.len(), KeyScope::ALL.len());
    }

    #[test]
    fn only_administration_is_out_of_every_scope_but_admin() {
        for scope in KeyScope::ALL.iter().filter(|s| **s != KeyScope::Admin) {
            assert!(!scope.reaches(Reach::Administration), "{scope}");
        }
    }

    #[test]
    fn a_scope_needs_the_role_it_could_act_with() {
        let made_by = |role: UserRole| -> Vec<KeyScope> {
            KeyScope::ALL.iter().copied().filter(|s| role.allows(s.least_role())).collect()
        };
        assert_eq!(made_by(UserRole::Viewer), [KeyScope::Read]);
        assert_eq!(made_by(UserRole::Operator), [KeyScope::Integration, KeyScope::Read, KeyScope::Operate]);
        assert_eq!(made_by(UserRole::Admin), KeyScope::ALL);
    }

    #[test]
    fn scopes_parse_by_name() {
        for scope in KeyScope::ALL {
            assert_eq!(scope.as_str().parse::<KeyScope>(), Ok(*scope));
        }
        assert!("readOnly".parse::<KeyScope>().is_err());
    }
}
