import re, sys, collections, subprocess
CUOBJ='/tmp/cuobj/nvidia/cu13/bin/cuobjdump'
def load(cubin, fn_filter='wsp_kernel'):
    out=subprocess.run([CUOBJ,'-sass',cubin],capture_output=True,text=True).stdout
    ins=[];on=False
    for l in out.splitlines():
        if 'Function :' in l: on = fn_filter in l
        if not on: continue
        m=re.match(r'\s+/\*([0-9a-f]{4,5})\*/\s+(.*?);',l)
        if m: ins.append((int(m.group(1),16),m.group(2).strip()))
    return ins
def code(t):
    op=re.sub(r'^@!?U?P\w+\s+','',t).split()[0].split('.')[0]
    return {'HMMA':'H','LDSM':'L','LDG':'G','BRA':'|','SYNCS':'Y','BAR':'B','STS':'s','LDS':'l','SHFL':'f','MUFU':'e','FMUL':'m','LDGSTS':'g','UBLKCP':'c','LDL':'X','STL':'x'}.get(op,'.')
for f in sys.argv[1:]:
    ins=load(f)
    hm=[a for a,t in ins if 'HMMA' in t]
    best=None
    for a,t in ins:
        mm=re.search(r'BRA.*?0x([0-9a-f]+)',t)
        if mm:
            tgt=int(mm.group(1),16)
            if tgt<a and tgt<=hm[0] and hm[-1]<=a:
                if best is None or a-tgt<best[1]-best[0]: best=(tgt,a)
    rng=[(a,t) for a,t in ins if best[0]<=a<=best[1]]
    c=collections.Counter(re.sub(r'^@!?U?P\w+\s+','',t).split()[0].split('.')[0] for a,t in rng)
    print(f, 'total', len(ins), 'loop', len(rng), 'instr', dict(sorted(c.items(),key=lambda x:-x[1])[:12]))
    s=''.join(code(t) for a,t in rng)
    for i in range(0,len(s),150): print('  ',s[i:i+150])
