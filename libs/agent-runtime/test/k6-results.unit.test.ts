/** K6: results feed back as tool messages; large ones offload to the ResultStore and page back. */
import { describe, expect, it } from 'vitest';
import { answer, call, harness, probeTool, toolResults } from './harness.js';

const big = Array.from({ length: 2500 }, (_, i) => `line ${i}`).join('\n'); // ~22 000 chars

describe('K6 tool results', () => {
  it('a small result is fed back as the tool message itself', async () => {
    const h = harness([call(['read_a', {}]), answer('done')], [probeTool('read_a', { output: 'small' })]);
    const r = await h.run();
    expect(r.state.messages.find((m) => m.role === 'tool')).toEqual({ role: 'tool', callId: 'call_0_0', name: 'read_a', content: 'small', isError: false });
  });

  it.each([
    ['default page size', 8000],
    ['small pages', 3000],
  ])('a large result is offloaded and pages back whole (%s)', async (_c, limit) => {
    const h = harness([call(['read_a', {}]), answer('done')], [probeTool('read_a', { output: big })], { policy: { inlineResultChars: 8000, previewChars: 1000 } });
    const r = await h.run();
    const ref = toolResults(r.events)[0]!.offloadedRef;
    expect(ref).not.toBeNull();
    const toolMessage = r.state.messages.find((m) => m.role === 'tool');
    expect(toolMessage?.role === 'tool' && toolMessage.content.length).toBeLessThan(1500);
    expect(toolMessage?.role === 'tool' && toolMessage.content).toContain(ref);

    let text = big.slice(0, 1000);
    let offset: number | null = 1000;
    while (offset !== null) {
      const page = await h.results.read(h.ctx.taskId, ref!, offset, limit);
      text += page!.text;
      offset = page!.nextOffset;
    }
    expect(text).toBe(big);
  });

  it('read_tool_result pages through the loop, and only for the owning run', async () => {
    const tool = probeTool('read_a', { output: big });
    const h = harness(
      [call(['read_a', {}]), call(['read_tool_result', { ref: 'result:id-0002', offset: 1000, limit: 50 }]), call(['read_tool_result', { ref: 'result:nope' }]), answer('done')],
      [tool],
    );
    const r = await h.run();
    const results = toolResults(r.events);
    expect(results[0]?.offloadedRef).toBe('result:id-0002');
    expect(results.map((e) => [e.tool, e.outcome])).toEqual([
      ['read_a', 'ok'],
      ['read_tool_result', 'ok'],
      ['read_tool_result', 'tool_error'],
    ]);
    const page = r.state.messages.filter((m) => m.role === 'tool')[1];
    expect(page?.role === 'tool' && page.content.startsWith(big.slice(1000, 1050))).toBe(true);
    expect(await h.results.read('another-task', 'result:id-0002', 0, 10)).toBeNull();
  });
});
