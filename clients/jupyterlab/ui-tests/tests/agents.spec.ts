// Agents calling agents (seed 002) in the panel: the task list shows the tree
// (each agent's task below its caller, labelled with the agent); the caller's
// view lists the agents it called, and the asks that wait in them, labelled
// with the agent and answered there; an agent's own view answers the rest and
// links back to its caller; what each agent returned shows under the caller.
import { expect, test } from '@jupyterlab/galata';
import * as fs from 'fs';
import * as path from 'path';

import { openPanel, request, screenshot } from './control';

test("an agent tree, its agents' concurrent asks answered from the caller and from the agent", async ({ page }) => {
  const workspace = process.env.HDSP_WORKSPACE!;
  await openPanel(page);
  const root = (await request('start-tree')).trim();
  const rootRow = page.locator(`[data-testid="hdsp-task-item"][data-task-id="${root}"]`);
  await rootRow.click();

  // The tree: both agents' tasks right below their caller, one level deeper.
  const children = page.locator(`[data-testid="hdsp-task-item"][data-parent-id="${root}"]`);
  await expect(children).toHaveCount(2);
  await expect(children.filter({ hasText: 'writer' })).toHaveAttribute('data-depth', '1');
  await expect(children.filter({ hasText: 'reviewer' })).toHaveAttribute('data-depth', '1');
  const order = await page
    .locator('[data-testid="hdsp-task-item"]')
    .evaluateAll(rows => rows.map(r => r.getAttribute('data-task-id')));
  const at = order.indexOf(root);
  const childIds = await children.evaluateAll(rows => rows.map(r => r.getAttribute('data-task-id')));
  expect(order.slice(at + 1, at + 3).sort()).toEqual([...childIds].sort());

  // The caller's view: the writer's two asks (one reply, two writes) wait at
  // once, labelled with the agent.
  const agents = page.getByTestId('hdsp-agents');
  await expect(agents.getByTestId('hdsp-agent-task')).toHaveCount(2);
  const asks = agents.getByTestId('hdsp-agent-ask');
  await expect(asks).toHaveCount(2);
  await expect(asks.first().getByTestId('hdsp-agent')).toHaveText('writer');
  await expect(children.filter({ hasText: 'writer' }).getByTestId('hdsp-task-asks')).toHaveText('2 asks');
  await screenshot(page, 'agents-tree-asks');

  // One is approved here, in the caller's view.
  const first = asks.filter({ hasText: 'a.txt' });
  await first.getByTestId('hdsp-approve').click();
  await expect(asks).toHaveCount(1);
  await expect.poll(() => fs.existsSync(path.join(workspace, 'a.txt'))).toBe(true);

  // The other in the writer's own view, which links back to its caller.
  await agents.getByTestId('hdsp-agent-task').filter({ hasText: 'writer' }).getByRole('button').click();
  await expect(page.locator('.hdsp-task-header').getByTestId('hdsp-agent')).toHaveText('writer');
  const second = page.locator('[data-testid="hdsp-conversation"] [data-testid="hdsp-ask"]');
  await expect(second).toHaveCount(1);
  await expect(second).toContainText('b.txt');
  await second.getByTestId('hdsp-deny').click();
  await expect(page.getByTestId('hdsp-task-state')).toHaveText(/completed/i);
  await page.getByTestId('hdsp-parent-link').click();

  // Back at the caller: done, with what each agent returned.
  await expect(page.getByTestId('hdsp-task-state')).toHaveText(/completed/i);
  const results = agents.getByTestId('hdsp-agent-result');
  await expect(results.filter({ hasText: 'returned: wrote a.txt' })).toHaveCount(1);
  await expect(results.filter({ hasText: 'returned: looks fine' })).toHaveCount(1);
  await expect(agents.getByTestId('hdsp-agent-ask')).toHaveCount(0);
  await screenshot(page, 'agents-tree-done');
  expect(fs.existsSync(path.join(workspace, 'b.txt'))).toBe(false);
});
