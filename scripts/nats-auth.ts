import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { natsRoles } from "@sloserve/contracts";
import { REPO_ROOT, composeNatsAuthFile, generateNatsPasswords, natsPasswordEnv, withNomadNatsAuth } from "@sloserve/stack";

/**
 * The NATS users of the deployments, from libs/contracts/src/nats-permissions.ts (docs/SECURITY.md).
 *   npm run nats:auth                 rewrites deploy/nats-auth.conf and the users' block of deploy/nomad/nats.nomad.hcl
 *   npm run nats:auth -- --passwords  prints a fresh random password per user as NATS_PASSWORD_<ROLE>=… lines (for compose's .env)
 */
const { values } = parseArgs({ options: { passwords: { type: "boolean", default: false } } });

if (values.passwords) {
  const passwords = generateNatsPasswords();
  for (const role of natsRoles) console.log(`${natsPasswordEnv(role)}=${passwords[role]}`);
} else {
  const compose = join(REPO_ROOT, "deploy", "nats-auth.conf");
  writeFileSync(compose, composeNatsAuthFile());
  const nomad = join(REPO_ROOT, "deploy", "nomad", "nats.nomad.hcl");
  writeFileSync(nomad, withNomadNatsAuth(readFileSync(nomad, "utf8")));
  console.log(`wrote ${compose} and the users of ${nomad}`);
}
