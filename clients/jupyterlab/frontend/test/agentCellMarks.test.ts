import { AGENT_CELL_CLASS, agentMarkOf, showMark } from '../src/agentCellMarks';

/** As much of an element as showMark touches. */
function fakeNode(): HTMLElement {
  const classes = new Set<string>();
  return {
    classList: {
      toggle: (name: string, on: boolean) => {
        if (on) {
          classes.add(name);
        } else {
          classes.delete(name);
        }
        return on;
      },
      contains: (name: string) => classes.has(name)
    },
    dataset: {} as DOMStringMap
  } as unknown as HTMLElement;
}

describe('agentMarkOf', () => {
  it('reads the mark the notebook tools write', () => {
    expect(agentMarkOf({ editedBy: 'agent', task: 't-1', ts: 1700000000000 })).toEqual({ task: 't-1' });
    expect(agentMarkOf({ editedBy: 'agent' })).toEqual({ task: null });
  });

  it('takes nothing else for a mark', () => {
    for (const value of [undefined, null, 'agent', 3, [], ['agent'], {}, { editedBy: 'user' }, { editedBy: true }]) {
      expect(agentMarkOf(value)).toBeNull();
    }
  });

  it('keeps a task id that is not a short string out of the page', () => {
    expect(agentMarkOf({ editedBy: 'agent', task: { toString: 'x' } })).toEqual({ task: null });
    expect(agentMarkOf({ editedBy: 'agent', task: 'x'.repeat(129) })).toEqual({ task: null });
  });
});

describe('showMark', () => {
  it('puts the class and the task on a marked cell and takes them off again', () => {
    const node = fakeNode();
    showMark(node, { task: 't-1' });
    expect(node.classList.contains(AGENT_CELL_CLASS)).toBe(true);
    expect(node.dataset.hdspTask).toBe('t-1');
    showMark(node, null);
    expect(node.classList.contains(AGENT_CELL_CLASS)).toBe(false);
    expect(node.dataset.hdspTask).toBeUndefined();
  });
});
