-- Datasets (issue 15): reading a version walks the dataset's records in insertion order (seq) and
-- keeps the live ones from the index alone, so a page stops after its LIMIT instead of sorting the
-- whole version first (the range index found the rows but needed that sort on every page).
CREATE INDEX dataset_records_order ON dataset_records(dataset_id, seq, added_version, removed_version);
DROP INDEX dataset_records_range;
