// Issue 21: the open task's mode and todo list in the panel. A slash command
// from the workspace puts the task in analyst mode; the list the agent keeps
// shows as a checklist (its text as text, never HTML); the user edits it as
// markdown, the daemon sends it back (taskTodoListUpdated) and tells the model,
// which the Python side reads in the next request.
import { expect, test } from '@jupyterlab/galata';

import { openPanel, startTask } from './control';

test('the todo list the agent keeps, and an edit from the panel told to the model', async ({ page }) => {
  const pageErrors: string[] = [];
  page.on('pageerror', e => pageErrors.push(e.message));
  await openPanel(page);
  await startTask(page, '/plan-it data.csv');
  const state = page.getByTestId('hdsp-task-state');
  await expect(state).toHaveText(/completed/i);

  const list = page.getByTestId('hdsp-todo-list');
  await expect(list.getByTestId('hdsp-mode')).toHaveText('analyst');
  await expect(list).toHaveAttribute('data-mode', 'analyst');
  const items = list.getByTestId('hdsp-todo-item');
  await expect(items).toHaveCount(3);
  await expect(items.nth(0)).toHaveAttribute('data-status', 'completed');
  await expect(items.nth(1)).toHaveAttribute('data-status', 'in_progress');
  await expect(items.nth(2)).toHaveAttribute('data-status', 'pending');
  await expect(items.nth(0)).toContainText('load <b>data.csv</b>');
  await expect(list.locator('b')).toHaveCount(0);
  await expect(list).toContainText('Todo 1/3');

  // The user edits it as markdown; the row follows the daemon's event.
  await list.getByTestId('hdsp-todo-edit').click();
  const text = list.getByTestId('hdsp-todo-text');
  await expect(text).toHaveValue('- [x] load <b>data.csv</b>\n- [-] clean it\n- [ ] plot');
  await text.fill('- [x] load data.csv\n- [x] clean it\n- [-] plot y against x');
  await list.getByTestId('hdsp-todo-save').click();
  await expect(items).toHaveCount(3);
  await expect(items.nth(2)).toHaveAttribute('data-status', 'in_progress');
  await expect(items.nth(2)).toContainText('plot y against x');
  await expect(list).toContainText('Todo 2/3');

  // The next message's request carries the edit (the Python side checks it).
  await page.getByTestId('hdsp-prompt').fill('Go on');
  await page.getByTestId('hdsp-send').click();
  await expect(page.locator('[data-testid="hdsp-message"][data-say="completion_result"]').filter({ hasText: 'plotted' })).toHaveCount(1);
  await expect(state).toHaveText(/completed/i);
  expect(pageErrors).toEqual([]);
});
