-- Spec ids are namespaced per tenant: `specs` and `spec_versions` are rebuilt keyed (tenant_id, id),
-- so two tenants can each own a spec `foo` without seeing, versioning or shadowing each other's.
-- Files uploaded with a spec version (fixture files and SQL files named by `path:`) are rows of
-- `spec_files`, each naming a content-addressed blob in blobs/sha256/<digest>.
-- Existing rows keep their seq (list cursors stay valid) and move under the tenant that owned them.
CREATE TABLE specs_by_tenant (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    id TEXT NOT NULL,
    name TEXT NOT NULL,
    latest_version INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (tenant_id, id)
);
INSERT INTO specs_by_tenant (seq, tenant_id, id, name, latest_version, created_at, updated_at)
    SELECT seq, tenant_id, id, name, latest_version, created_at, updated_at FROM specs;

CREATE TABLE spec_versions_by_tenant (
    tenant_id TEXT NOT NULL,
    spec_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    name TEXT NOT NULL,
    yaml TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, spec_id, version),
    FOREIGN KEY (tenant_id, spec_id) REFERENCES specs_by_tenant(tenant_id, id) ON DELETE CASCADE
);
INSERT INTO spec_versions_by_tenant (tenant_id, spec_id, version, name, yaml, sha256, created_at)
    SELECT s.tenant_id, v.spec_id, v.version, v.name, v.yaml, v.sha256, v.created_at
    FROM spec_versions v JOIN specs s ON s.id = v.spec_id;

DROP TABLE spec_versions;
DROP TABLE specs;
-- RENAME also rewrites the foreign key of spec_versions_by_tenant to the new name.
ALTER TABLE specs_by_tenant RENAME TO specs;
ALTER TABLE spec_versions_by_tenant RENAME TO spec_versions;
CREATE INDEX specs_tenant_name ON specs(tenant_id, name);

CREATE TABLE spec_files (
    tenant_id TEXT NOT NULL,
    spec_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    path TEXT NOT NULL,
    digest TEXT NOT NULL,
    size INTEGER NOT NULL,
    mode INTEGER NOT NULL DEFAULT 420,
    PRIMARY KEY (tenant_id, spec_id, version, path),
    FOREIGN KEY (tenant_id, spec_id, version) REFERENCES spec_versions(tenant_id, spec_id, version) ON DELETE CASCADE
);
CREATE INDEX spec_files_digest ON spec_files(digest);
