/** A one-tenant config file for a test: the demo keys, then `body` (tenant fields indented 4 spaces). */
export function tenantYaml(tenantId: string, body: string): string {
  return `tenants:\n  - id: ${tenantId}\n    apiKeys: [demo-key]\n    adminKeys: [demo-admin-key]\n${body.replace(/^\n/, "")}`;
}
