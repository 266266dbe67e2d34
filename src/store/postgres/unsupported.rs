//! What the PostgreSQL backend does not have yet: export/import of a user's memory. It answers
//! [`StoreError::Unsupported`].

use super::PostgresStore;
use crate::store::{ImportCounts, StoreError, StoreResult, Transfer, UserBundle, UserScope};

fn transfer() -> StoreError {
    StoreError::Unsupported(
        "export and import are not available on the PostgreSQL store yet".to_owned(),
    )
}

impl Transfer for PostgresStore {
    fn export_user(&self, _scope: &UserScope) -> StoreResult<Option<UserBundle>> {
        Err(transfer())
    }

    fn import_user(&self, _scope: &UserScope, _bundle: &UserBundle) -> StoreResult<ImportCounts> {
        Err(transfer())
    }
}
