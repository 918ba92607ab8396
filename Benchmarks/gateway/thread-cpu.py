"""CPU per push of the gateway's threads in each benchmark of one bench.sh run.

usage: thread-cpu.py BENCH_LOG SAMPLES
  BENCH_LOG: bench.sh's output with each line prefixed by `date +%s.%N` (see docs/benchmarks.md)
  SAMPLES:   thread-cpu.sh's output for the same run
Assumes `bench.sh 3 200000` (600,000 pushes in benchmark 1). The commit thread and the WAL
checkpointer are Foundation threads, named `com.apple.root.default-qos` (comm truncated to
`oot.default-qos`): the busier one is the commit thread. `loops` are the event loops, `pool`
the blocking thread pool (pending reads).
"""
import sys, collections
log, mon = sys.argv[1], sys.argv[2]
lines=[l.rstrip('\n').split(' ',1) for l in open(log)]
def t_of(prefix):
    for ts, txt in lines:
        if txt.startswith(prefix): return float(ts)
t1=t_of('== 1.'); t2=t_of('median gateway'); t3=t_of('== 2.'); t4=t_of('== 3.'); t5=t_of('gateway RSS after the backlog')
hz=100
samples=collections.defaultdict(list)
for l in open(mon):
    f=l.split()
    if len(f)<6 or not (f[-1].isdigit() and f[-2].isdigit()): continue  # a line cut by kill
    ts,pid,tid,*name,u,s=f
    samples[(tid,' '.join(name) if tid!=pid else 'main')].append((float(ts),int(u)+int(s)))
def window(a,b):
    tot=collections.Counter()
    for (tid,name),v in samples.items():
        before=[c for ts,c in v if ts<=a]; after=[c for ts,c in v if ts<=b]
        c0=before[-1] if before else 0; c1=after[-1] if after else 0
        cls=('commit/ckpt-'+tid) if name=='oot.default-qos' else 'loops' if name.startswith('NIO-ELT') else 'pool' if name.startswith('TP-') else 'other'
        tot[cls]+=c1-c0
    return tot
for label,a,b,n in [('bench1 (600k pushes)',t1,t2,600000),('bench2 e2e (200k pushes+acks)',t3,t4,200000),('bench3 drain (600k acks)',t4,t5,600000)]:
    if a is None or b is None: continue
    w=window(a,b)
    print(label, ' '.join(f'{k} {w[k]/hz/n*1e6:.2f}µs' for k in sorted(w, key=lambda k:-w[k]) if k!='other' and w[k]>10), f'other {w["other"]/hz/n*1e6:.2f}µs', f'all {sum(w.values())/hz/n*1e6:.2f}µs')
