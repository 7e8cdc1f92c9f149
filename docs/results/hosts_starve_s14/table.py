import re,subprocess,sys
rows={}
for f in ['base1.log','cmp2x2.log','v2x2.log','v2x2b.log','v3x1.log','cg0.log']:
    try: lines=open('docs/results/hosts_starve_s14/'+f).read().splitlines()
    except FileNotFoundError: continue
    for l in lines:
        w=l.split()
        if 'maxgap_ms' not in w: continue
        k=(w[0],w[1]); g=int(w[w.index('maxgap_ms')+1]); l0,l1=float(w[8]),float(w[9])
        r=rows.setdefault(k,{'n':0,'fail':0,'max':0,'over':0,'lo':99,'hi':0})
        r['n']+=1; r['fail']+=w[4]!='rc=0'; r['max']=max(r['max'],g); r['over']+=g>1000
        r['lo']=min(r['lo'],l0,l1); r['hi']=max(r['hi'],l0,l1)
names={'Acg':'one cpu cgroup (now)','A':'a group per host (before)','Bcg':'one cgroup + sleeping waits','B':'sleeping waits, a group per host'}
out=['| layout | scheduling groups | runs | longest gap | runs with a gap > 1 s | load |','|---|---|---|---|---|---|']
for lay in ['2x2','3x1']:
    for v in ['Acg','A','Bcg','B']:
        r=rows.get((lay,v))
        if not r: continue
        out.append(f"| {lay} | {names[v]} | {r['n']} | {r['max']/1000:.2f} s | {r['over']} | {r['lo']:.1f}–{r['hi']:.1f} |")
print('\n'.join(out))
cg=[rows[(l,'Acg')] for l in ['2x2','3x1']]
print('FINDING', f"{cg[0]['n']} runs of hosts.2x2.suite and {cg[1]['n']} of hosts.3x1.suite", f"{max(c['max'] for c in cg)/1000:.2f} s")
