//! The SQLite store's users: each row of memory belongs to one (tenant, name); erasing a user
//! removes every row of theirs.

use super::{ensure_uid, find_uid, SqliteStore};
use crate::store::{StoreResult, UserScope, Users};

impl Users for SqliteStore {
    fn ensure_user(&self, scope: &UserScope) -> StoreResult<i64> {
        if let Some(uid) = self.find_user(scope)? {
            return Ok(uid);
        }
        self.write(|tx| ensure_uid(tx, scope))
    }

    fn find_user(&self, scope: &UserScope) -> StoreResult<Option<i64>> {
        self.read(|c| find_uid(c, scope))
    }

    fn list_users(&self, tenant: &str) -> StoreResult<Vec<String>> {
        self.read(|c| {
            let mut statement =
                c.prepare("SELECT name FROM users WHERE tenant = ?1 ORDER BY name")?;
            let names = statement
                .query_map([tenant], |row| row.get(0))?
                .collect::<Result<Vec<String>, _>>()?;
            Ok(names)
        })
    }

    fn list_tenants(&self) -> StoreResult<Vec<String>> {
        self.read(|c| {
            let mut statement = c.prepare("SELECT DISTINCT tenant FROM users ORDER BY tenant")?;
            let tenants = statement
                .query_map([], |row| row.get(0))?
                .collect::<Result<Vec<String>, _>>()?;
            Ok(tenants)
        })
    }

    fn delete_user(&self, scope: &UserScope) -> StoreResult<bool> {
        self.erase(|tx| {
            let Some(uid) = find_uid(tx, scope)? else {
                return Ok(false);
            };
            // Cascades to every table that holds the user's memory (FTS rows via triggers).
            tx.execute("DELETE FROM users WHERE id = ?1", [uid])?;
            Ok(true)
        })
    }
}
