import re,sys,collections
ev=[]
for l in open(sys.argv[1]):
    m=re.match(r'\s*(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:(\w+):(.*)',l)
    if not m: continue
    tid,cpu,t,e,rest=int(m[1]),int(m[2]),float(m[3]),m[4],m[5]
    ev.append((int(round(t*1e9)),cpu,e,tid,rest))
sp=[[tuple(map(int,l.split())) for l in open(f)] for f in (sys.argv[2],sys.argv[3])]
# on-cpu intervals per cpu
run=collections.defaultdict(list) # cpu -> list (start,end,tid)
cur={}
for t,cpu,e,tid,rest in ev:
    if e=='sched_switch':
        m=re.search(r'prev_pid=(\d+).*next_pid=(\d+)',rest)
        p,n=int(m[1]),int(m[2])
        if cpu in cur: run[cpu].append((cur[cpu][1],t,cur[cpu][0]))
        cur[cpu]=(n,t)
names={}
for a in sys.argv[4:]:
    k,v=a.split('=');names[int(k)]=v
def oncpu(s,e):
    d=collections.Counter()
    for cpu,iv in run.items():
        for a,b,tid in iv:
            lo,hi=max(a,s),min(b,e)
            if hi>lo: d[names.get(tid,'other' if tid else 'idle')]+=hi-lo
    return d
for kind in (0,1):
    tot=collections.Counter(); n=0; sw=0
    for (k,s,e),(k1,s1,e1) in zip(*sp):
        if k!=kind: continue
        s0=min(s,s1); e0=max(e,e1)
        c=oncpu(s0,e0); tot.update(c); n+=1
    print('kolo' if kind==0 else 'mpi', n, {k:round(v/n/1000,2) for k,v in sorted(tot.items())})
import statistics
for kind in (0,1):
  hits=collections.Counter(); amt=collections.defaultdict(list); durs=[]
  for (k,s,e),(k1,s1,e1) in zip(*sp):
    if k!=kind: continue
    c=oncpu(min(s,s1),max(e,e1)); durs.append(max(e,e1)-min(s,s1))
    for who in ('cA','cB'):
        if c.get(who,0)>0: hits[who]+=1; amt[who].append(c[who]/1000)
  print(kind, 'span med', statistics.median(durs)/1000, {w:(hits[w], round(statistics.median(amt[w]),1), round(max(amt[w]),1)) for w in amt})
import sys as _s; _s.exit(0)
CO=(6933,6934)
print('x')
offs=[]
for (k,s,e),(k1,s1,e1) in zip(*sp):
    if k!=0: continue
    S,E=min(s,s1),max(e,e1)
    for cpu,iv in run.items():
        for a,b,tid in iv:
            if tid in CO and b>S and a<E: offs.append((round((a-S)/1000,1), round((b-a)/1000,1), tid))
offs.sort()
import random
print(len(offs), offs[::max(1,len(offs)//40)])
# wakeups of coordinators: who wakes them (waker tid) overall
wk=collections.Counter()
for t,cpu,e,tid,rest in ev:
    if e=='sched_waking':
        m=re.search(r'pid=(\d+)',rest)
        if int(m[1]) in (27334,27335): wk[(tid, int(m[1]))]+=1
print(wk)
print('wakes of a coordinator by its main thread: offset from own call start / to own call end (us)')
for rank,(m,c) in enumerate(((27328,27335),(27329,27334))):
    ws=[t for t,cpu,e,tid,rest in ev if e=='sched_waking' and tid==m and int(re.search(r'pid=(\d+)',rest)[1])==c]
    res=collections.Counter(); ex=[]
    for t in ws:
        for k,s,e in sp[rank]:
            if s-200000<=t<=e+200000:
                where = ('in kolo' if k==0 else 'in mpi') if s<=t<=e else ('between')
                res[where]+=1
                if s<=t<=e: ex.append((k,round((t-s)/1000,1),round((e-t)/1000,1)))
                break
    print(rank,res, sorted(ex)[::max(1,len(ex)//25)])
print('between wakes: (kind of prev span, us after its end, kind of next, us before next start)')
for rank,(m,c) in enumerate(((27328,27335),(27329,27334))):
    ws=[t for t,cpu,e,tid,rest in ev if e=='sched_waking' and tid==m and int(re.search(r'pid=(\d+)',rest)[1])==c]
    ex=[]
    S=sp[rank]
    for t in ws:
        for i in range(len(S)-1):
            if S[i][2]<t<S[i+1][1]: ex.append((S[i][0],round((t-S[i][2])/1000,1),S[i+1][0],round((S[i+1][1]-t)/1000,1)))
    print(rank,len(ex),collections.Counter((a,c) for a,b,c,d in ex), sorted(ex)[::max(1,len(ex)//20)])
