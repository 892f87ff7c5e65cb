//! Who may do what: the three roles, from most to least trusted.

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
