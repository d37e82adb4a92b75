"""`svc spec validate FILE...` and `svc spec schema` (offline), `svc spec push FILE` and `svc specs list|get|upload|delete`.

Uploading reads the fixture files the spec names (`fixtures: [{path: ...}]`, relative to the spec
file) and sends them with it (client/local_spec.py); the daemon never reads them from its host."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from client.api import Client
from client.routes import R


def register(sub: argparse._SubParsersAction) -> None:
    spec = sub.add_parser("spec", help="work with spec files locally")
    spec_actions = spec.add_subparsers(dest="action", metavar="ACTION", required=True)
    validate = spec_actions.add_parser("validate", help="check spec files offline; exit 1 on errors")
    validate.add_argument("files", nargs="+", metavar="FILE")
    validate.add_argument("--json", action="store_true",
                          help="print [{file, ok, spec_id, errors: [{loc, line, column, msg}]}] on stdout (editors' problem matchers)")
    validate.set_defaults(func=validate_files, needs_daemon=False)
    schema = spec_actions.add_parser("schema", help="print the JSON Schema of spec files (for editors and validators)",
                                     description="Print the JSON Schema of spec files (the same document the daemon "
                                                 "serves). Point an editor at it with a first line "
                                                 "`# yaml-language-server: $schema=spec.schema.json` in the spec.")
    schema.add_argument("-o", "--output", metavar="FILE", help="write it to FILE instead of stdout")
    schema.set_defaults(func=print_schema, needs_daemon=False)
    push = spec_actions.add_parser("push", help="validate and upload a spec file with its fixture files (= svc specs upload)")
    push.add_argument("file")
    push.add_argument("--name", help="display name (default: file name without extension)")
    push.set_defaults(func=upload_spec)
    from client.commands.spec_check import register_check

    register_check(spec_actions)

    specs = sub.add_parser("specs", help="specs stored in the daemon")
    actions = specs.add_subparsers(dest="action", metavar="ACTION", required=True)
    ls = actions.add_parser("list", help="list specs")
    ls.add_argument("--name", help="only specs with this name")
    ls.add_argument("--limit", type=int, default=100)
    ls.set_defaults(func=list_specs)
    get = actions.add_parser("get", help="show one spec")
    get.add_argument("spec_id")
    get.add_argument("--version", type=int, help="a specific version (default latest)")
    get.add_argument("--yaml", action="store_true", help="print only the YAML")
    get.set_defaults(func=get_spec)
    versions = actions.add_parser("versions", help="list a spec's versions")
    versions.add_argument("spec_id")
    versions.set_defaults(func=spec_versions)
    upload = actions.add_parser("upload", help="upload a spec file with the fixture files it names (every upload = new version)")
    upload.add_argument("file")
    upload.add_argument("--name", help="display name (default: file name without extension)")
    upload.set_defaults(func=upload_spec)
    delete = actions.add_parser("delete", help="delete a spec and all its versions")
    delete.add_argument("spec_id")
    delete.set_defaults(func=delete_spec)


def read_spec_file(path: str) -> str:
    from client.console import CliError

    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"{path}: no such file")
    except (IsADirectoryError, UnicodeDecodeError, PermissionError) as exc:
        raise CliError(f"{path}: cannot read: {exc}")


async def print_schema(args, client: Client) -> int:
    from daemon.spec.schema import spec_json_schema_text

    text = spec_json_schema_text()
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"svc: wrote the spec schema to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def validate_file(path: str, text: str) -> dict[str, Any]:
    """One spec file checked offline: `{file, ok, spec_id?, invariants?, runs?, errors: [{loc, line, column,
    msg}]}`: the schema, the fixture files an upload would send, and prompt placeholders nothing fills
    (client/spec_lint.py). The MCP tool `svc_spec_validate` answers the same."""
    import yaml

    from client.local_spec import SpecFilesError, collect_files
    from client.spec_lint import column_of, placeholder_issues
    from daemon.spec import SpecValidationError, load_spec

    def located(loc: str, line: int | None, msg: str) -> dict[str, Any]:
        last = loc.rsplit(".", 1)[-1] if loc else ""
        return {"loc": loc, "line": line, "column": column_of(text, line, None if last.isdigit() or not last else last), "msg": msg}

    try:
        doc = load_spec(text, path)
    except SpecValidationError as err:
        return {"file": path, "ok": False, "errors": [located(i.loc, i.line, i.msg) for i in err.issues]}
    errors: list[dict[str, Any]] = []
    try:  # the fixture files an upload would send must be there
        collect_files(yaml.safe_load(text), Path(path).parent)
    except SpecFilesError as exc:
        from daemon.spec.yaml_lines import parse_yaml_with_lines

        errors.append(located("fixtures", parse_yaml_with_lines(text).lines.get(("fixtures",)), str(exc)))
    errors += placeholder_issues(doc, text)
    result: dict[str, Any] = {"file": path, "ok": not errors, "spec_id": doc.id, "invariants": len(doc.invariants),
                              "runs": doc.total_runs(), "errors": errors}
    return result


async def validate_files(args, client: Client) -> int:
    import json

    results = []
    for path in args.files:
        result = validate_file(path, read_spec_file(path))
        results.append(result)
        if args.json:
            continue
        for issue in result["errors"]:
            where = f"{path}:{issue['line']}" if issue["line"] is not None else path
            print(f"{where} {issue['loc']}: {issue['msg']}" if issue["loc"] else f"{where}: {issue['msg']}", file=sys.stderr)
        if result["ok"]:
            print(f"{path}: ok (spec '{result['spec_id']}', {result['invariants']} invariants, {result['runs']} runs)", file=sys.stderr)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0 if all(r["ok"] for r in results) else 1


async def list_specs(args, client: Client) -> int:
    from client.console import emit

    emit(await client.call(R.LIST_SPECS, query={"name": args.name, "limit": args.limit}))
    return 0


async def get_spec(args, client: Client) -> int:
    from client.console import emit

    record = await client.call(R.GET_SPEC, query={"version": args.version}, spec_id=args.spec_id)
    if args.yaml:
        sys.stdout.write(record["yaml"])
    else:
        emit(record)
    return 0


async def spec_versions(args, client: Client) -> int:
    from client.console import emit

    emit(await client.call(R.SPEC_VERSIONS, spec_id=args.spec_id))
    return 0


async def upload_spec(args, client: Client) -> int:
    from client.console import CliError, emit
    from client.local_spec import SpecFilesError, upload_spec_file

    text = read_spec_file(args.file)
    name = args.name or Path(args.file).stem
    try:
        record = await upload_spec_file(client, args.file, name, text)
    except SpecFilesError as exc:
        raise CliError(f"{args.file}: {exc}")
    files = record.get("files") or []
    print(f"uploaded spec '{record['id']}' version {record['version']}"
          + (f" with {len(files)} fixture file{'s' if len(files) != 1 else ''}" if files else ""), file=sys.stderr)
    emit(record)
    return 0


async def delete_spec(args, client: Client) -> int:
    await client.call(R.DELETE_SPEC, spec_id=args.spec_id)
    print(f"deleted spec '{args.spec_id}'", file=sys.stderr)
    return 0
